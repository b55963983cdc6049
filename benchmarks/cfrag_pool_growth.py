"""What CF-RAG's counterfactual questions add to the evidence pool, from two finished eval runs
of the same items: one with counterfactuals, one made with `cfrag.counterfactuals = false`.

Per item present in both: the passages in the first run's pool but not the second's, split into
injected distractors and the item's own passages, and how many of them hold a gold alias
(containment, as `cfrag_subsets.py` counts answer passages); plus the pool sizes and how many
counterfactuals were generated, passed the similarity and answer filters, and were kept (read
from the counterfactual stage's decision in the trace). No model is loaded.

    python benchmarks/cfrag_pool_growth.py \
      results/cfrag/extracted/hotpotqa_distractor-cfrag-d16 \
      results/cfrag/extracted/hotpotqa_distractor-cfrag_no_counterfactuals-d16
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from faithrag.answers import containment
from faithrag.eval.datasets import load_dataset
from faithrag.eval.distractors import DistractorPool
from faithrag.retrieval.searcher import index_text

# the decision of the `cfrag.counterfactuals` stage (faithrag/methods/cfrag/cfrag.py)
DECISION = re.compile(r"kept (\d+) of (\d+) counterfactuals \((\d+) passed the filter\)")

# per passage id of an item: (injected, holds a gold alias)
PassageFacts = Callable[[str], dict[str, tuple[bool, bool]]]


def load_records(run: Path) -> dict[str, dict]:
    records = (json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()
               if line.strip())
    return {r["id"]: r for r in records if (r.get("extra") or {}).get("cfrag")}


def counterfactual_counts(record: dict) -> tuple[int, int, int] | None:
    """(kept, generated, passed the filter), None when the stage's decision is missing."""
    for stage in record.get("trace", {}).get("stages", []):
        if stage.get("name") == "cfrag.counterfactuals":
            match = DECISION.fullmatch(stage.get("decision", ""))
            return tuple(int(g) for g in match.groups()) if match else None
    return None


def pool_growth(with_cf: dict[str, dict], without_cf: dict[str, dict],
                facts_of: PassageFacts) -> Counter:
    counts: Counter = Counter()
    for item_id in with_cf.keys() & without_cf.keys():
        pool = with_cf[item_id]["extra"]["cfrag"]["pool"]
        base = without_cf[item_id]["extra"]["cfrag"]["pool"]
        facts = facts_of(item_id)
        counts["items"] += 1
        counts["pool with"] += len(pool)
        counts["pool without"] += len(base)
        for passage_id in set(pool) - set(base):
            injected, answers = facts[passage_id]
            counts["added"] += 1
            counts["added injected" if injected else "added own"] += 1
            counts["added holding an answer"] += answers
        cf = counterfactual_counts(with_cf[item_id])
        if cf is None:
            counts["decisions unread"] += 1
        else:
            for name, value in zip(("kept", "generated", "passed"), cf):
                counts[name] += value
    return counts


def dataset_facts(run: Path, data_dir: str | None) -> PassageFacts:
    """Injected or own, and gold alias or not, for each passage a run's items could retrieve."""
    manifest = json.loads((run / "manifest.json").read_text())
    dataset = load_dataset(manifest["dataset"], data_dir)
    level = (manifest.get("sweep") or {}).get("distractors", 0)
    injector = DistractorPool(dataset) if level else None
    items = {item.id: item for item in dataset.items}

    def facts_of(item_id: str) -> dict[str, tuple[bool, bool]]:
        item = items[item_id]
        injected = injector.select(item, level) if injector else []
        injected_ids = {p.id for p in injected}
        return {p.id: (p.id in injected_ids, containment(index_text(p), item.answers))
                for p in item.passages() + injected}
    return facts_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("with_counterfactuals", type=Path)
    parser.add_argument("without_counterfactuals", type=Path)
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    c = pool_growth(load_records(args.with_counterfactuals),
                    load_records(args.without_counterfactuals),
                    dataset_facts(args.with_counterfactuals, args.data_dir))
    if not c["items"]:
        raise SystemExit("the two runs share no CF-RAG item")
    n = c["items"]
    print("| items | mean pool, with / without | passages added | injected | item's own "
          "| holding a gold alias | counterfactuals generated | passed the filters | kept |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {n} | {c['pool with'] / n:.1f} / {c['pool without'] / n:.1f} | {c['added']} "
          f"| {c['added injected']} | {c['added own']} | {c['added holding an answer']} "
          f"| {c['generated']} | {c['passed']} | {c['kept']} |")
    if c["decisions unread"]:
        print(f"({c['decisions unread']} items without a readable counterfactual decision)")


if __name__ == "__main__":
    main()

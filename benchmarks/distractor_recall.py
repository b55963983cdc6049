"""Do injected distractors push the answer out of retrieval? Splits a sweep's items by that.

For the first --limit items of a set, an item's answer passages are its own passages that
contain a gold alias (the containment the distractor selection uses). With --distractors N
injected, retrieval over the item's passages (--mode, default BM25 as in the eval runs)
takes the top --k, as `--context item_retrieval` does. Items are "kept" when an answer passage is still in that top k and "lost" when none is
(items with no answer passage at all are "none"). For each run directory given (records of
`faithrag eval`, e.g. vanilla and CF-RAG, at this level or another one: the groups are always
those at --distractors), counts the items it got right in each group; for CF-RAG records
also how often an answer passage reached its evidence pool (its dialectical retrieval searches
with the counterfactual queries too). No model is loaded.

    python benchmarks/distractor_recall.py --dataset popqa --distractors 16 \\
      results/cfrag/main/popqa-vanilla-d16 results/cfrag/extracted/popqa-cfrag-d16
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from faithrag.answers import containment
from faithrag.eval.datasets import QAItem, load_dataset
from faithrag.eval.distractors import DistractorPool
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.retrieval.searcher import index_text

GROUPS = ("kept", "lost", "none")


def answer_passage_ids(item: QAItem) -> set[str]:
    return {p.id for p in item.passages() if containment(index_text(p), item.answers)}


def group_of(item: QAItem, pool: DistractorPool, distractors: int, k: int, mode: str) -> str:
    answer_ids = answer_passage_ids(item)
    if not answer_ids:
        return "none"
    passages = item.passages() + pool.select(item, distractors)
    top = InMemoryRetriever(passages, mode=mode).retrieve(item.question, k)
    return "kept" if any(p.id in answer_ids for p in top) else "lost"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--data-dir")
    parser.add_argument("--distractors", type=int, required=True)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--mode", default="bm25", choices=("bm25", "dense", "hybrid"))
    parser.add_argument("--limit", type=int, default=100)
    args = parser.parse_args()

    dataset = load_dataset(args.dataset, args.data_dir)
    pool = DistractorPool(dataset)
    items = dataset.items[: args.limit]
    groups = {item.id: group_of(item, pool, args.distractors, args.k, args.mode)
              for item in items}
    sizes = Counter(groups.values())
    print(f"{args.dataset}, {args.distractors} injected, {args.mode} top {args.k}, "
          f"first {len(items)} items: "
          + ", ".join(f"{g} {sizes[g]}" for g in GROUPS))
    print(f"\n| run | group (at {args.distractors} injected) | items in run | right "
          "| answer passage in CF-RAG's pool |")
    print("|---|---|---:|---:|---:|")
    answers = {item.id: answer_passage_ids(item) for item in items}
    for run in args.runs:
        counts: Counter = Counter()
        for line in (run / "results.jsonl").read_text().splitlines():
            record = json.loads(line)
            group = groups.get(record["id"])
            if group is None or record.get("correct") is None:
                continue
            counts[group, "n"] += 1
            counts[group, "right"] += bool(record["correct"])
            pooled = ((record.get("extra") or {}).get("cfrag") or {}).get("pool")
            if pooled is not None:
                counts[group, "pooled"] += any(p in answers[record["id"]] for p in pooled)
                counts[group, "has pool"] += 1
        for group in GROUPS:
            if counts[group, "n"]:
                pooled = str(counts[group, "pooled"]) if counts[group, "has pool"] else ""
                print(f"| {run.name} | {group} | {counts[group, 'n']} | "
                      f"{counts[group, 'right']} | {pooled} |")


if __name__ == "__main__":
    main()

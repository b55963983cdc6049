"""Do CF-RAG's evidence subsets hold the answer? Per draft, from the records of eval runs.

An answer passage is one of the item's own passages that contains a gold alias. For every
draft of every item, counts whether its subset holds an answer passage, whether only the pool
does, or neither, and how many of those drafts were right (smart EM). Records written since the
ninth session carry each draft's evidence ids; for older ones the subsets are recomputed from
the recorded pool exactly as the method draws them (same embedder, clustering, seed and
sampling), which needs the run's distractors and the MiniLM embedder but no LLM.

    python benchmarks/cfrag_subsets.py results/cfrag/extracted/hotpotqa_distractor-cfrag-d16
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from faithrag.answers import containment, smart_em
from faithrag.config import CFRAGConfig
from faithrag.eval.datasets import load_dataset
from faithrag.eval.distractors import DistractorPool
from faithrag.methods.cfrag.cfrag import question_seed
from faithrag.methods.cfrag.clustering import spectral_clusters
from faithrag.methods.cfrag.sampling import stratified_subsets
from faithrag.retrieval.embedder import get_embedder
from faithrag.retrieval.searcher import index_text

GROUPS = ("subset holds it", "only the pool holds it", "the pool lacks it")


def recomputed_subsets(pool_texts: list[str], question: str, settings: CFRAGConfig,
                       embedder) -> list[list[int]]:
    seed = question_seed(settings.seed, question)
    clustering = spectral_clusters(embedder.embed(pool_texts), settings.k_clusters, seed)
    return stratified_subsets(clustering.labels, settings.m_subsets, settings.subset_size, seed,
                              anchor=0 if settings.anchor_top else None).subsets


def tally(run: Path, data_dir: str | None) -> Counter:
    manifest = json.loads((run / "manifest.json").read_text())
    settings = CFRAGConfig.model_validate(manifest["config"]["cfrag"])
    dataset = load_dataset(manifest["dataset"], data_dir)
    items = {item.id: item for item in dataset.items}
    level = (manifest.get("sweep") or {}).get("distractors", 0)
    injector = DistractorPool(dataset) if level else None
    embedder = None
    counts: Counter = Counter()
    for line in (run / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        trace = (record.get("extra") or {}).get("cfrag") or {}
        drafts = trace.get("hypotheses") or []
        if not drafts or not trace.get("pool"):
            continue
        item = items[record["id"]]
        by_id = {p.id: p for p in item.passages() + (injector.select(item, level)
                                                      if injector else [])}
        pool = [by_id[i] for i in trace["pool"]]
        holds = [containment(index_text(p), item.answers) for p in pool]
        if all("evidence" in d for d in drafts):
            index = {p.id: i for i, p in enumerate(pool)}
            subsets = [[index[i] for i in d["evidence"]] for d in drafts]
        else:
            embedder = embedder or get_embedder("minilm")
            subsets = recomputed_subsets([index_text(p) for p in pool], item.question, settings,
                                         embedder)
            if len(subsets) != len(drafts):
                counts["items not recomputable"] += 1
                continue
        counts["items"] += 1
        counts["items whose pool holds it"] += any(holds)
        counts["... and every subset"] += any(holds) and all(
            any(holds[i] for i in subset) for subset in subsets)
        counts["items whose most relevant passage holds it"] += holds[0]
        for draft, subset in zip(drafts, subsets):
            group = (GROUPS[0] if any(holds[i] for i in subset)
                     else GROUPS[1] if any(holds) else GROUPS[2])
            counts[group, "drafts"] += 1
            counts[group, "right"] += bool(draft["answer"]) and smart_em(draft["answer"],
                                                                         item.answers)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    print("| run | items | pool holds an answer passage | … in every subset | … as its most "
          "relevant passage | " + " | ".join(f"drafts: {g} (right)" for g in GROUPS) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(GROUPS))
    for run in args.runs:
        c = tally(run, args.data_dir)
        cells = [f"{c[g, 'drafts']} ({c[g, 'right']})" for g in GROUPS]
        print(f"| {run.name} | {c['items']} | {c['items whose pool holds it']} | "
              f"{c['... and every subset']} | {c['items whose most relevant passage holds it']} | "
              + " | ".join(cells) + " |")
        if c["items not recomputable"]:
            print(f"({run.name}: {c['items not recomputable']} items whose subsets could not "
                  "be recomputed were skipped)")


if __name__ == "__main__":
    main()

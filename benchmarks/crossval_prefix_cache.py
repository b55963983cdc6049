"""What llama.cpp's prefix cache (`llm.prefix_cache`) saves on cross-validated re-ranking.

Every detection round sends the question and the numbered passages again, with an instruction
that changes (the pairs already checked); detection marks them as a recurring prefix, so with the
cache the embedded backend reads them once per item instead of once per round. For each of the
first --items ranking items the re-ranker (support verdict, as in the issue-5 runs) re-ranks the
BM25 order with the cache off and on, alternating which goes first, on one model instance.
Records per item the seconds, detection rounds and detection seconds both ways, and whether the
removals and the ranking came out the same (the cached prefix is evaluated as its own batch, so
logits may differ slightly). Shows progress on stderr, prints and optionally writes JSON.

    python benchmarks/crossval_prefix_cache.py --dataset ramdocs_rank --items 6 --threads 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from faithrag import registry
from faithrag.config import Config
from faithrag.eval.datasets import load_dataset
from faithrag.eval.rank_runner import first_stage_order
from faithrag.llm import load_llm
from faithrag.types import Question, Trace


def rerank_once(reranker, llm, item, cache_on: bool) -> dict:
    llm.prefix_cache = cache_on
    trace = Trace()
    passages = first_stage_order(item, "bm25", trace)
    start = time.perf_counter()
    result = reranker.rerank(Question(item.query, item.id), passages, trace)
    seconds = time.perf_counter() - start
    detections = [s for s in trace.steps if s.name == "crossval.detect"]
    return {"seconds": seconds, "rounds": len(detections),
            "detect_seconds": sum(s.seconds for s in detections),
            "ranking": [p.id for p in result.passages],
            "removed": [r.passage.id for r in result.removed]}


def summarise(rows: list[dict]) -> dict:
    """Medians over the items, and over those with a second detection round (the only ones the
    cache can speed up); how many items kept their removals and ranking."""
    def median(key: str, mode: str, subset: list[dict]) -> float | None:
        return round(statistics.median(r[mode][key] for r in subset), 2) if subset else None

    repeated = [r for r in rows if r["off"]["rounds"] > 1 and r["on"]["rounds"] > 1]
    summary = {"items": len(rows), "items_with_two_rounds": len(repeated),
               "same_removed": sum(r["off"]["removed"] == r["on"]["removed"] for r in rows),
               "same_ranking": sum(r["off"]["ranking"] == r["on"]["ranking"] for r in rows)}
    for subset, label in ((rows, "all"), (repeated, "two_rounds")):
        for key in ("seconds", "detect_seconds"):
            off, on = median(key, "off", subset), median(key, "on", subset)
            summary[f"{label}_{key}"] = {"off": off, "on": on,
                                         "ratio": round(on / off, 3) if off else None}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="ramdocs_rank")
    parser.add_argument("--data-dir")
    parser.add_argument("--items", type=int, default=6)
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()

    config = Config.load(None, {"llm.model": args.model, "llm.n_threads": args.threads,
                                "rerank.verdict": "support"})
    llm = load_llm(config.llm)
    reranker = registry.build("reranker", "crossval", llm, config)
    rows = []
    for number, item in enumerate(load_dataset(args.dataset, args.data_dir).items[: args.items]):
        print(f"item {number + 1}/{args.items}: {item.id}", file=sys.stderr, flush=True)
        row = {"id": item.id}
        for cache_on in ((False, True) if number % 2 == 0 else (True, False)):
            row["on" if cache_on else "off"] = rerank_once(reranker, llm, item, cache_on)
        rows.append(row)
        print(f"  off {row['off']['seconds']:.1f} s, on {row['on']['seconds']:.1f} s, "
              f"rounds {row['off']['rounds']}/{row['on']['rounds']}", file=sys.stderr, flush=True)
    result = {"dataset": args.dataset, "model": args.model, "threads": args.threads,
              "verdict": "support", **summarise(rows), "rows": rows}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

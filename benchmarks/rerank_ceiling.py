"""What removing the contrary passages alone could give a re-ranking run: its ceiling.

For each item of each run, the run's ranking is scored as recorded and again with every
contrary passage taken out and the rest left in order, which is what a perfect cross-validation
verdict would leave for the listwise step to re-order. On the retriever's order ("none") this
bounds how much nDCG@1 crossval can gain by removal alone; the rest of any gain must come from
ranking by relevance. No model is loaded.

    python benchmarks/rerank_ceiling.py results/rerank200/ramdocs_rank-none \
      results/rerank200/kre_conflict_rank-none
"""

from __future__ import annotations

import argparse
import statistics

from faithrag.eval.datasets import load_dataset
from faithrag.eval.ranking_metrics import ranking_metrics
from faithrag.eval.report import load_run
from faithrag.eval.stats import bootstrap_ci, wilson_interval


def ceiling(run_dir: str, data_dir: str | None = None) -> dict:
    """nDCG@1 and contrary@1 of the run's rankings as recorded and with the contrary
    passages removed, over the items where nDCG@1 is defined."""
    run = load_run(run_dir)
    items = {item.id: item for item in load_dataset(run.dataset, data_dir).items}
    recorded, removed, contrary_top = [], [], 0
    for record in run.records:
        if record.get("ranking") is None or record.get("error"):
            continue
        item = items[record["id"]]
        ranking = list(record["ranking"])
        contrary = item.contrary_pids()
        before = ranking_metrics(item, ranking, ks=(1,))
        after = ranking_metrics(item, [pid for pid in ranking if pid not in contrary], ks=(1,))
        if before["ndcg@1"] is None:
            continue
        recorded.append(before["ndcg@1"])
        removed.append(after["ndcg@1"] or 0.0)
        contrary_top += bool(before["contrary@1"])
    return {"run": run.label or run_dir, "dataset": run.dataset, "n": len(recorded),
            "ndcg@1": statistics.mean(recorded), "ndcg@1_ci": bootstrap_ci(recorded),
            "contrary@1": contrary_top / len(recorded),
            "contrary@1_ci": wilson_interval(contrary_top, len(recorded)),
            "ndcg@1_without_contrary": statistics.mean(removed),
            "ndcg@1_without_contrary_ci": bootstrap_ci(removed),
            "gain": statistics.mean(removed) - statistics.mean(recorded)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories of ranking sets")
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    print("| run | n | nDCG@1 | contrary@1 | nDCG@1, contrary removed | gain |")
    print("|---|---:|---|---|---|---:|")
    for run_dir in args.runs:
        c = ceiling(run_dir, args.data_dir)
        print(f"| {c['run']} ({c['dataset']}) | {c['n']} | {c['ndcg@1']:.3f} "
              f"[{c['ndcg@1_ci'][0]:.3f}, {c['ndcg@1_ci'][1]:.3f}] | {c['contrary@1']:.1%} "
              f"[{c['contrary@1_ci'][0]:.1%}, {c['contrary@1_ci'][1]:.1%}] | "
              f"{c['ndcg@1_without_contrary']:.3f} [{c['ndcg@1_without_contrary_ci'][0]:.3f}, "
              f"{c['ndcg@1_without_contrary_ci'][1]:.3f}] | {c['gain']:+.3f} |")


if __name__ == "__main__":
    main()

"""A re-ranker against its baselines on the same queries, paired, and against issue 5's goals.

For each baseline run, over the queries both runs have (errored ones left out): nDCG@1 of both
and the difference with a paired bootstrap interval; contrary@1 of both (queries with a contrary
passage first), the queries only one of them puts one first and McNemar's exact p; the answer
accuracy from the top k where both runs answered; the queries where A's ranking is B's, whole
and in first place (a listwise re-ranker that echoes its input order shows here). Then the goals
as the issue states them: contrary@1 <= 5 % (Wilson interval) and nDCG@1 >= the best baseline
+ 0.10, the best baseline being the one with the highest nDCG@1 on the shared queries. Where A
removes passages, its difference from each baseline is split in two: B's order with A's removed
passages taken out (what the removals alone do) and the rest (A's own ordering). Partial runs
compare on the queries they share, so a running re-ranker can be read before it ends (say so
when quoting it).

    python benchmarks/rerank_paired.py results/rerank200/ramdocs_rank-crossval-support \
      results/rerank200/ramdocs_rank-none results/rerank200/ramdocs_rank-bi_encoder
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

from faithrag.eval.datasets import RankItem, load_dataset
from faithrag.eval.metrics import record_correct
from faithrag.eval.ranking_metrics import ranking_metrics
from faithrag.eval.report import load_run
from faithrag.eval.stats import bootstrap_ci, paired_difference, wilson_interval

CONTRARY_GOAL = 0.05
NDCG_MARGIN_GOAL = 0.10


@dataclass
class Query:
    ndcg1: float | None
    contrary1: bool | None
    correct: bool | None
    ranking: list[str]
    removed: list[str]


def queries(run_dir: str) -> tuple[str, str, dict[str, Query]]:
    """The run's dataset, its name (the directory's) and, per query id, nDCG@1, whether a
    contrary passage comes first, the answer's correctness, the ranking and the removed ids."""
    run = load_run(run_dir)
    out = {}
    for record in run.records:
        if record.get("error") or record.get("ranking") is None:
            continue
        metrics = record.get("metrics") or {}
        contrary = metrics.get("contrary@1")
        out[record["id"]] = Query(metrics.get("ndcg@1"),
                                  None if contrary is None else contrary > 0,
                                  record_correct(record), list(record["ranking"]),
                                  [r["id"] for r in record.get("removed") or ()])
    return run.dataset, Path(run_dir).name, out


def compare(a: dict[str, Query], b: dict[str, Query]) -> dict:
    """A against B on the queries both have: nDCG@1, contrary@1 and answers, paired; the
    queries where A's ranking is B's, and where its first passage is B's."""
    shared = [i for i in a if i in b]
    ndcg = [i for i in shared if a[i].ndcg1 is not None and b[i].ndcg1 is not None]
    contrary = [i for i in shared if a[i].contrary1 is not None and b[i].contrary1 is not None]
    answered = [i for i in shared if a[i].correct is not None and b[i].correct is not None]
    result: dict = {"shared": len(shared), "ndcg_n": len(ndcg),
                    "same_order": sum(a[i].ranking == b[i].ranking for i in shared),
                    "same_first": sum(a[i].ranking[:1] == b[i].ranking[:1] for i in shared)}
    if ndcg:
        diffs = [a[i].ndcg1 - b[i].ndcg1 for i in ndcg]
        result.update(ndcg_a=statistics.mean(a[i].ndcg1 for i in ndcg),
                      ndcg_b=statistics.mean(b[i].ndcg1 for i in ndcg),
                      ndcg_difference=statistics.mean(diffs),
                      ndcg_difference_ci=bootstrap_ci(diffs))
    if contrary:
        result["contrary"] = paired_difference([a[i].contrary1 for i in contrary],
                                               [b[i].contrary1 for i in contrary])
    if answered:
        result["answers"] = paired_difference([a[i].correct for i in answered],
                                              [b[i].correct for i in answered])
    return result


def removal_split(a: dict[str, Query], b: dict[str, Query], items: dict[str, RankItem]
                  ) -> dict | None:
    """nDCG@1 of B, of B's order without the passages A removed (what A would give keeping B's
    order, `rerank.final_order=first_stage` when B is A's first stage), and of A, on the queries
    both have where it is defined (None when A removed nothing there); the same three for the
    share of those queries with a contrary passage first."""
    ids = [i for i in a if i in b and a[i].ndcg1 is not None and b[i].ndcg1 is not None]
    if not any(a[i].removed for i in ids):
        return None
    pruned, pruned_contrary = [], []
    for i in ids:
        removed = set(a[i].removed)
        kept = [pid for pid in b[i].ranking if pid not in removed]
        metrics = ranking_metrics(items[i], kept, ks=(1,))
        pruned.append(metrics["ndcg@1"])
        pruned_contrary.append(bool(metrics["contrary@1"]))
    return {"n": len(ids), "b": statistics.mean(b[i].ndcg1 for i in ids),
            "pruned": statistics.mean(pruned), "a": statistics.mean(a[i].ndcg1 for i in ids),
            "b_contrary": statistics.mean(bool(b[i].contrary1) for i in ids),
            "pruned_contrary": statistics.mean(pruned_contrary),
            "a_contrary": statistics.mean(bool(a[i].contrary1) for i in ids)}


def goals(a: dict[str, Query], comparisons: dict[str, dict]) -> dict:
    """Issue 5's two goals for A: its contrary@1 with a Wilson interval, and its nDCG@1 margin
    over the baseline with the highest nDCG@1 on the queries A shares with it (comparisons:
    compare(A, baseline) per baseline name)."""
    firsts = [q.contrary1 for q in a.values() if q.contrary1 is not None]
    out: dict = {"contrary_n": len(firsts)}
    if firsts:
        out.update(contrary=sum(firsts) / len(firsts),
                   contrary_ci=wilson_interval(sum(firsts), len(firsts)))
    compared = {name: c for name, c in comparisons.items() if "ndcg_b" in c}
    if compared:
        best = max(compared, key=lambda name: compared[name]["ndcg_b"])
        out.update(best=best, margin=compared[best]["ndcg_difference"],
                   margin_ci=compared[best]["ndcg_difference_ci"])
    return out


def _rate(d: dict, side: str) -> str:
    return f"{100 * d[f'accuracy_{side}']:.1f}"


def _difference(d: dict) -> str:
    lo, hi = d["difference_ci"]
    return (f"{100 * d['difference']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] "
            f"({d['only_a']} / {d['only_b']}, p {d['mcnemar_p']:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reranker", help="run directory of the re-ranker to judge")
    parser.add_argument("baselines", nargs="+", help="run directories of its baselines")
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    dataset, label, a = queries(args.reranker)
    baselines = {}
    for run_dir in args.baselines:
        other_dataset, other_label, b = queries(run_dir)
        if other_dataset != dataset:
            parser.error(f"{run_dir} is on {other_dataset}, {args.reranker} on {dataset}")
        baselines[other_label] = b
    print(f"A = {label} ({dataset}, {len(a)} queries)\n")
    print("| baseline B | shared | nDCG@1 A | nDCG@1 B | A − B [95% CI] | contrary@1 A | "
          "contrary@1 B | A − B (A only / B only, p) | answers A | answers B | A − B | "
          "same order / same first |")
    print("|---|---:|---:|---:|---|---:|---:|---|---:|---:|---|---|")
    comparisons = {name: compare(a, b) for name, b in baselines.items()}
    for name, c in comparisons.items():
        cells = [name, str(c["shared"])]
        if "ndcg_a" in c:
            lo, hi = c["ndcg_difference_ci"]
            cells += [f"{c['ndcg_a']:.3f}", f"{c['ndcg_b']:.3f}",
                      f"{c['ndcg_difference']:+.3f} [{lo:+.3f}, {hi:+.3f}] (n {c['ndcg_n']})"]
        else:
            cells += ["–"] * 3
        for key in ("contrary", "answers"):
            d = c.get(key)
            cells += ([_rate(d, "a"), _rate(d, "b"), f"{_difference(d)} (n {d['n']})"] if d
                      else ["–"] * 3)
        cells.append(f"{c['same_order']} / {c['same_first']}")
        print("| " + " | ".join(cells) + " |")
    items = {item.id: item for item in load_dataset(dataset, args.data_dir).items}
    print()
    for name, b in baselines.items():
        split = removal_split(a, b, items)
        if split:
            print(f"A's removals on {name}'s order (n {split['n']}): nDCG@1 {split['b']:.3f} "
                  f"-> {split['pruned']:.3f} without A's removed passages (removals "
                  f"{split['pruned'] - split['b']:+.3f}) -> {split['a']:.3f} as A ranks them "
                  f"(ordering {split['a'] - split['pruned']:+.3f}); contrary@1 "
                  f"{100 * split['b_contrary']:.1f} % -> {100 * split['pruned_contrary']:.1f} % "
                  f"-> {100 * split['a_contrary']:.1f} %")
    g = goals(a, comparisons)
    if "contrary" in g:
        lo, hi = g["contrary_ci"]
        verdict = "met by the point estimate" if g["contrary"] <= CONTRARY_GOAL else "not met"
        print(f"contrary@1 <= {CONTRARY_GOAL:.0%}: {100 * g['contrary']:.1f} % "
              f"[{100 * lo:.1f}, {100 * hi:.1f}] over {g['contrary_n']} queries: {verdict}")
    if "best" in g:
        lo, hi = g["margin_ci"]
        verdict = "met by the point estimate" if g["margin"] >= NDCG_MARGIN_GOAL else "not met"
        print(f"nDCG@1 >= best baseline + {NDCG_MARGIN_GOAL:.2f}: {g['margin']:+.3f} "
              f"[{lo:+.3f}, {hi:+.3f}] over {g['best']}: {verdict}")


if __name__ == "__main__":
    main()

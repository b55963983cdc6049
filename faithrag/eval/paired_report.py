"""The first run against each other run, paired over the items both scored (`paired_report`):
whole, per slice of the dataset's item order (`item_slice`, `sliced_ids`) or per value of a field
(faithrag.eval.runs.field_groups); for re-ranking runs also nDCG@1, contrary@1 and what the first
run's removals alone do."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faithrag.errors import DataError
from faithrag.eval.datasets import load_dataset
from faithrag.eval.ranking_metrics import ranking_metrics
from faithrag.eval.runs import Run, field_groups, is_ranking, run_outcomes
from faithrag.eval.stats import bootstrap_ci, paired_difference
from faithrag.eval.tables import pct, points, table, wilson


def item_slice(text: str) -> slice:
    """`LO:HI` as a slice of a dataset's item order (0-based, HI exclusive): "0:100" is the
    first 100 items. ValueError for anything else."""
    lo, sep, hi = text.partition(":")
    if not sep or not lo.isdigit() or not hi.isdigit() or int(lo) >= int(hi):
        raise ValueError(f"{text!r} is not a slice of the item order like 0:100")
    return slice(int(lo), int(hi))


def sliced_ids(dataset: str, ids_a: Collection[str], ids_b: Collection[str],
               slices: Sequence[slice], data_dir: str | Path | None = None
               ) -> list[tuple[slice, list[str]]]:
    """For each slice of the dataset's item order (the order `faithrag eval --limit` takes items
    in, whatever order the records were written in), the ids both runs hold, in that order."""
    order = [item.id for item in load_dataset(dataset, data_dir).items]
    return [(part, [i for i in order[part] if i in ids_a and i in ids_b]) for part in slices]


def paired_report(run_args: Sequence[str], slices: Sequence[slice] = (),
                  data_dir: str | Path | None = None, seed: int = 0,
                  by: str | None = None) -> str:
    """Markdown: the first run (A) against each other run (B), paired over the items both
    scored, on the whole run, on each slice of the dataset's item order, or on each group of
    A's items by their value of the field ``by`` (see ``field_groups``): both accuracies
    (Wilson 95%), A − B with a paired bootstrap 95% CI, the items only one got right and the
    exact McNemar p. A run written `RUN@CELL` is one ablation cell of a run made with
    `csrag.ablation_grid`. When A is a re-ranking run, a second table pairs nDCG@1 (bootstrap
    CI of the difference), contrary@1 (McNemar) and the rankings (same order / same first
    passage); where A removed passages, its nDCG@1 and contrary@1 difference from B is split
    into B's order without A's removed passages and A's own ordering. DataError for fewer than
    two runs, runs on different datasets or a cell a run does not have."""
    if len(run_args) < 2:
        raise DataError("a paired comparison needs two runs or more",
                        hint="give the runs as RUN_A RUN_B [RUN_C ...]")
    if slices and by:
        raise DataError("give slices or a field to group by, not both",
                        hint="drop --slices or --by")
    loaded = []
    for arg in run_args:
        try:
            loaded.append(run_outcomes(arg))
        except ValueError as err:
            raise DataError(str(err), hint="name a cell the run has, or none") from None
    (run_a, a), others = loaded[0], list(zip(run_args[1:], loaded[1:]))
    for arg, (run_b, _) in others:
        if run_b.dataset != run_a.dataset:
            raise DataError(f"{arg} is on {run_b.dataset}, {run_args[0]} on {run_a.dataset}",
                            hint="pair runs on the same dataset")
    lines = [f"A = {run_args[0]} ({run_a.dataset})", "",
             ("Items scored by both runs" + (", per slice of the dataset's item order" if slices
                                             else f", by A's {by}" if by else "")
              + ". Accuracy in % [Wilson 95%]; A − B in points [paired bootstrap 95%]; "
              "p: exact McNemar."), ""]
    rows = []
    for arg, (_, b) in others:
        both = [i for i in a if i in b]
        parts: list[tuple[str, list[str]]] = (
            [(f"{part.start + 1}–{part.stop}", ids)
             for part, ids in sliced_ids(run_a.dataset, a, b, slices, data_dir)] if slices
            else list(field_groups(run_a, by, both, data_dir).items()) if by
            else [("all", both)])
        for where, ids in parts:
            if not ids:
                rows.append([arg, where, "0", "", "", "", "", ""])
                continue
            d = paired_difference([a[i] for i in ids], [b[i] for i in ids], seed=seed)
            rows.append([arg, where, str(len(ids)), wilson(sum(a[i] for i in ids), len(ids)),
                         wilson(sum(b[i] for i in ids), len(ids)), points(d),
                         f"{d['only_a']} / {d['only_b']}", f"{d['mcnemar_p']:.2g}"])
    lines += table(["B", by or "items", "n", "A", "B", "A − B", "A only / B only",
                     "McNemar p"], rows)
    if is_ranking(run_a):
        lines += _ranking_pairs(run_a, [(arg, run_b) for arg, (run_b, _) in others], data_dir,
                                seed)
    return "\n".join(lines) + "\n"


@dataclass
class _Ranked:
    ndcg1: float | None
    contrary1: bool | None
    ranking: list[str]
    removed: list[str]


def _ranked(run: Run) -> dict[str, _Ranked]:
    out = {}
    for record in run.records:
        if record.get("error") or record.get("ranking") is None:
            continue
        metrics = record.get("metrics") or {}
        contrary = metrics.get("contrary@1")
        out[record["id"]] = _Ranked(metrics.get("ndcg@1"), None if contrary is None
                                    else contrary > 0, list(record["ranking"]),
                                    [r["id"] for r in record.get("removed") or ()])
    return out


def _ranking_pairs(run_a: Run, others: list[tuple[str, Run]], data_dir: str | Path | None,
                   seed: int) -> list[str]:
    a = _ranked(run_a)
    rows, splits = [], []
    items: dict[str, Any] | None = None
    for arg, run_b in others:
        b = _ranked(run_b)
        shared = [i for i in a if i in b]
        ndcg = [i for i in shared if a[i].ndcg1 is not None and b[i].ndcg1 is not None]
        contrary = [i for i in shared if a[i].contrary1 is not None
                    and b[i].contrary1 is not None]
        row = [arg, str(len(shared))]
        if ndcg:
            diffs = [a[i].ndcg1 - b[i].ndcg1 for i in ndcg]
            lo, hi = bootstrap_ci(diffs, seed=seed)
            row += [f"{_mean_of(a[i].ndcg1 for i in ndcg):.3f}",
                    f"{_mean_of(b[i].ndcg1 for i in ndcg):.3f}",
                    f"{_mean_of(diffs):+.3f} [{lo:+.3f}, {hi:+.3f}] (n {len(ndcg)})"]
        else:
            row += ["–"] * 3
        if contrary:
            d = paired_difference([a[i].contrary1 for i in contrary],
                                  [b[i].contrary1 for i in contrary], seed=seed)
            row += [pct(d["accuracy_a"]), pct(d["accuracy_b"]),
                    f"{d['only_a']} / {d['only_b']}, p {d['mcnemar_p']:.2g} (n {d['n']})"]
        else:
            row += ["–"] * 3
        row.append(f"{sum(a[i].ranking == b[i].ranking for i in shared)} / "
                   f"{sum(a[i].ranking[:1] == b[i].ranking[:1] for i in shared)}")
        rows.append(row)
        if any(a[i].removed for i in ndcg):
            if items is None:
                items = {item.id: item for item in load_dataset(run_a.dataset, data_dir).items}
            splits.append(_removal_split(arg, a, b, ndcg, items))
    return ["", "## Rankings, paired", "",
            ("Queries both runs ranked (failed ones left out). nDCG@1 as 0–1, A − B with a "
             "paired bootstrap 95% CI; contrary@1: % of queries with a contrary passage first, "
             "the queries only A / only B put one first and the exact McNemar p; same order / "
             "same first: queries where A's ranking is B's, whole and in first place."), "",
            *table(["B", "shared", "nDCG@1 A", "nDCG@1 B", "A − B", "contrary@1 A",
                     "contrary@1 B", "A only / B only", "same order / same first"], rows),
            *(["", *splits] if splits else [])]


def _mean_of(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def _removal_split(arg: str, a: dict[str, _Ranked], b: dict[str, _Ranked], ids: list[str],
                   items: dict[str, Any]) -> str:
    """B's nDCG@1 and contrary@1, then B's order without the passages A removed (what A's
    removals alone do: `rerank.final_order=first_stage` when B is A's first stage), then A's."""
    pruned = []
    for i in ids:
        removed = set(a[i].removed)
        pruned.append(ranking_metrics(items[i], [p for p in b[i].ranking if p not in removed],
                                      ks=(1,)))
    b_ndcg, a_ndcg = _mean_of(b[i].ndcg1 for i in ids), _mean_of(a[i].ndcg1 for i in ids)
    p_ndcg = _mean_of(m["ndcg@1"] or 0.0 for m in pruned)
    return (f"- A's removals on {arg}'s order (n {len(ids)}): nDCG@1 {b_ndcg:.3f} → "
            f"{p_ndcg:.3f} without A's removed passages (removals {p_ndcg - b_ndcg:+.3f}) → "
            f"{a_ndcg:.3f} as A ranks them (ordering {a_ndcg - p_ndcg:+.3f}); contrary@1 "
            f"{pct(_mean_of(bool(b[i].contrary1) for i in ids))} → "
            f"{pct(_mean_of(bool(m['contrary@1']) for m in pruned))} → "
            f"{pct(_mean_of(bool(a[i].contrary1) for i in ids))} %")

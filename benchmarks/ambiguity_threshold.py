"""The `ambiguous` flag at other same-subject thresholds, from the kept ambiguity records (no LLM).

The conflict detector reports two disagreeing answer groups as `ambiguous` when the same-subject
log-odds of their first passages fall below `conflicts.same_subject_threshold` (-0.5 by default),
else as `passage_vs_passage`. `benchmarks/bench_conflicts.py ambiguity` keeps those log-odds in
each record, so the flag at any threshold follows from the records: `conflict` when the record has
them and they are below the threshold; otherwise the recorded `ambiguous` check (no conflict, or
could not tell, which is left out of precision and recall as in bench_conflicts' summary).

To choose a threshold without grading it on the items it was chosen on, the records of each class
are split in run order: the first `--evaluate-first` per class (the items the summary's table
reports) are only evaluated; the rest tune. The chosen threshold is the one with the highest
recall on the tuning items at precision >= `--min-precision` (ties: the higher precision, then the
threshold nearest the default); its precision and recall on the evaluation items are reported
with 95 % Wilson intervals, next to the default's.

    python benchmarks/bench_conflicts.py ambiguity --limit 90 --out runs/conflicts
    python benchmarks/ambiguity_threshold.py runs/conflicts/records.jsonl --evaluate-first 45
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from faithrag.config import ConflictsConfig
from faithrag.eval.stats import wilson_interval

DEFAULT = ConflictsConfig().same_subject_threshold


def read_ambiguity(path: Path) -> list[dict[str, Any]]:
    """The ambiguity records of `path`, in run order."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if r["command"] == "ambiguity"]


def split(records: list[dict[str, Any]], evaluate_first: int
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(evaluation, tuning): the first `evaluate_first` records of each label, and the rest."""
    seen = {0: 0, 1: 0}
    evaluation, tuning = [], []
    for record in records:
        seen[record["label"]] += 1
        (evaluation if seen[record["label"]] <= evaluate_first else tuning).append(record)
    return evaluation, tuning


def status(record: dict[str, Any], threshold: float) -> str:
    """The `ambiguous` check the detector gives `record` at `threshold`."""
    same = record["detector"]["outputs"].get("same_subject")
    if same is None:
        return record["checks"]["ambiguous"]
    return "conflict" if same["log_odds"] < threshold else "no_conflict"


def rates(records: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """Precision and recall of the flag at `threshold`, with their counts and intervals."""
    tp = fp = fn = 0
    for record in records:
        flagged = status(record, threshold)
        if flagged == "could_not_tell":
            continue
        if record["label"] == 1:
            tp += flagged == "conflict"
            fn += flagged == "no_conflict"
        else:
            fp += flagged == "conflict"
    return {"threshold": threshold, "tp": tp, "fp": fp, "fn": fn,
            "precision": _share(tp, tp + fp), "recall": _share(tp, tp + fn)}


def _share(k: int, n: int) -> dict[str, Any]:
    if n == 0:
        return {"value": None, "ci": None, "k": 0, "n": 0}
    low, high = wilson_interval(k, n)
    return {"value": k / n, "ci": [low, high], "k": k, "n": n}


def candidates(records: list[dict[str, Any]]) -> list[float]:
    """Thresholds that change the flag: just above each recorded log-odds, and the default."""
    values = {r["detector"]["outputs"]["same_subject"]["log_odds"] for r in records
              if r["detector"]["outputs"].get("same_subject")}
    return sorted({round(v + 0.0005, 4) for v in values} | {DEFAULT})


def choose(tuning: list[dict[str, Any]], min_precision: float) -> dict[str, Any] | None:
    """The tuning rates of the threshold with the highest recall at precision >= min_precision;
    None when no threshold reaches it."""
    ok = [r for r in (rates(tuning, t) for t in candidates(tuning))
          if r["precision"]["value"] is not None and r["precision"]["value"] >= min_precision
          and r["recall"]["value"] is not None]
    if not ok:
        return None
    return max(ok, key=lambda r: (r["recall"]["value"], r["precision"]["value"],
                                  -abs(r["threshold"] - DEFAULT)))


def _fmt(s: dict[str, Any]) -> str:
    if s["value"] is None:
        return "—"
    return f"{s['value']:.2f} [{s['ci'][0]:.2f}, {s['ci'][1]:.2f}] ({s['k']}/{s['n']})"


def report(records: list[dict[str, Any]], evaluate_first: int, min_precision: float) -> str:
    evaluation, tuning = split(records, evaluate_first)
    lines = [(f"evaluation: {len(evaluation)} records (the first {evaluate_first} per class); "
              f"tuning: {len(tuning)}"), "",
             ("| threshold | chosen on | tuning precision | tuning recall | evaluation precision "
              "| evaluation recall |"), "|---|---|---|---|---|---|"]
    chosen = choose(tuning, min_precision) if tuning else None
    rows = [(DEFAULT, "default")]
    if chosen is not None:
        rows.append((chosen["threshold"], f"tuning, precision >= {min_precision}"))
    for threshold, how in rows:
        tuned, evaluated = rates(tuning, threshold), rates(evaluation, threshold)
        lines.append(f"| {threshold:g} | {how} | {_fmt(tuned['precision'])} | "
                     f"{_fmt(tuned['recall'])} | {_fmt(evaluated['precision'])} | "
                     f"{_fmt(evaluated['recall'])} |")
    if tuning and chosen is None:
        lines.append(f"\nNo threshold reaches precision {min_precision} on the tuning records.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, help="bench_conflicts.py's records.jsonl")
    parser.add_argument("--evaluate-first", type=int, default=45,
                        help="records per class only evaluated (the rest tune)")
    parser.add_argument("--min-precision", type=float, default=0.8)
    args = parser.parse_args(argv)
    print(report(read_ambiguity(args.records), args.evaluate_first, args.min_precision))


if __name__ == "__main__":
    main()

"""Summary figures of an evaluation run from its result records.

Result records (one per item, as written by the runner to results.jsonl; the schema is
documented in faithrag/eval/runs.py) are aggregated by ``aggregate``; ``record_correct`` and
``cell_correct`` say whether one record counts as right. The per-item metrics the records carry
come from faithrag/answers.py (answer matching) and faithrag/eval/ranking_metrics.py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from faithrag.eval.stats import bootstrap_ci, wilson_interval


def record_correct(record: Mapping[str, Any]) -> bool | None:
    """A record's correctness for accuracy: its boolean ``correct``; an item whose output could
    not be parsed or that failed with an error (parse_status "failed"/"error") counts as wrong
    when ``correct`` is null; None means the item has no correctness (e.g. a ranking item)."""
    correct = record.get("correct")
    if isinstance(correct, bool):
        return correct
    if record.get("parse_status") in ("failed", "error"):
        return False
    return None


def cell_correct(record: Mapping[str, Any], cell: str) -> bool | None:
    """A record's correctness in one ablation cell of a run made with `csrag.ablation_grid` (the
    cell's pick, read off the same forward pass): None for an item with no two-way choice
    (skipped); an item that failed before its options were scored counts as wrong. ValueError
    when the record has cells but not this one."""
    if record.get("parse_status") == "skipped":
        return None
    variants = (record.get("extra") or {}).get("variants") or {}
    if not variants:
        return False
    if cell not in variants:
        raise ValueError(f"has no cell {cell!r}; it has {', '.join(variants)}")
    return variants[cell]["choice_index"] == record.get("gold_index")


def _is_number(value: Any) -> bool:
    """A finite int/float; booleans count (as 0/1)."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(records: Iterable[Mapping[str, Any]], confidence: float = 0.95,
              n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Summary figures over result records (JSON-ready, None where undefined):

    n, n_scored, correct, accuracy (= correct / n_scored, see ``record_correct``), accuracy_ci
    (Wilson), accuracy_bootstrap_ci, parse_failures / parse_failure_rate (parse_status
    "failed"), failed_items (parse_status "error"), skipped_items (parse_status "skipped": the
    item has no form the method can answer; not scored), mean_prompt_tokens, mean_completion_tokens,
    mean_seconds, total_seconds, and per metric name in the records' ``metrics`` dicts:
    {mean, n, undefined (null values), ci (Wilson when all values are 0/1, else bootstrap)}.
    """
    records = list(records)
    scored = [c for c in map(record_correct, records) if c is not None]
    n_correct = sum(scored)
    out: dict[str, Any] = {
        "n": len(records),
        "n_scored": len(scored),
        "correct": n_correct,
        "accuracy": n_correct / len(scored) if scored else None,
        "accuracy_ci": (list(wilson_interval(n_correct, len(scored), confidence))
                        if scored else None),
        "accuracy_bootstrap_ci": (list(bootstrap_ci(scored, confidence, n_resamples, seed))
                                  if scored else None),
        "parse_failures": sum(r.get("parse_status") == "failed" for r in records),
        "failed_items": sum(r.get("parse_status") == "error" for r in records),
        "skipped_items": sum(r.get("parse_status") == "skipped" for r in records),
    }
    answered = len(records) - out["skipped_items"]  # skipped items were never asked
    out["parse_failure_rate"] = out["parse_failures"] / answered if answered else None
    for key in ("prompt_tokens", "completion_tokens", "seconds"):
        out[f"mean_{key}"] = _mean([float(r[key]) for r in records if _is_number(r.get(key))])
    out["total_seconds"] = sum(float(r["seconds"]) for r in records if _is_number(r.get("seconds")))
    per_metric: dict[str, list[float]] = {}
    undefined: Counter[str] = Counter()
    for record in records:
        for name, value in (record.get("metrics") or {}).items():
            if _is_number(value):
                per_metric.setdefault(name, []).append(float(value))
            else:
                per_metric.setdefault(name, [])
                undefined[name] += 1
    metrics: dict[str, Any] = {}
    for name in sorted(per_metric):
        values = per_metric[name]
        entry: dict[str, Any] = {"mean": _mean(values), "n": len(values),
                                 "undefined": undefined[name], "ci": None}
        if values and all(v in (0.0, 1.0) for v in values):
            entry["ci"] = list(wilson_interval(int(sum(values)), len(values), confidence))
        elif values:
            entry["ci"] = list(bootstrap_ci(values, confidence, n_resamples, seed))
        metrics[name] = entry
    out["metrics"] = metrics
    return out

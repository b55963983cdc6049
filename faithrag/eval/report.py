"""Reports over evaluation run directories: a markdown table, summary.json and PNG plots.

The run directory (its manifest and records, and how they are read) is described in
faithrag/eval/runs.py.

``report(run_dirs, out_dir, compare=False, common=False, by=None)`` writes to ``out_dir``:

- ``report.md``: accuracy per method x dataset (with 95% Wilson CI and n), a detail table (n,
  accuracy, bootstrap CI, parse failures, failed and skipped items, mean prompt/completion tokens
  and seconds per item, and every per-item metric present, e.g. containment, EM, F1, nDCG@k,
  contrary@k), with ``by`` each run's accuracy per value of a field of its records or of the
  dataset's items (``field_groups``), the paired comparisons when ``compare`` is set, and notes
  on skipped lines;
- ``summary.json``: the same figures, plus each run's manifest;
- ``accuracy.png``: grouped bars of accuracy by method per dataset, Wilson 95% error bars
  (runs without a sweep);
- ``distractors.png``: accuracy against ``sweep.distractors`` per method, one panel per dataset
  (only when some run carries that value).

The tables are written here; the plots are drawn by faithrag/eval/plots.py.

Two tables are printed rather than written: ``paired_report(run_args, slices)``, the first run
against each other run on the items both scored, whole, per slice of the dataset's item order
or per value of a field (for re-ranking runs also nDCG@1, contrary@1 and what the first run's removals alone do); and
``cells_report(run_dirs)``, every ablation cell of a run made with ``csrag.ablation_grid``
against its unbiased cell, with the time and tokens per item.

Common: every run is cut to the items that all runs on its dataset hold, so that runs stopped
at different points (long runs resume) are summarised on the same items; the report says so.

Compare: for every dataset and every pair of runs on it, the items both runs scored are paired;
the report gives both accuracies, the difference with a paired bootstrap 95% CI, the discordant
counts and the exact McNemar p-value.

Run labels: the pipeline ("vanilla + crossval + antisyco"), plus the sweep settings, the
non-default configuration values and the `--offset` that tell the dataset's runs apart ("cfrag
[distractors=16, cfrag.causal_scoring=False]"); when two runs on one dataset would still share a
label, the model and then the run directory name are appended.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import DataError
from faithrag.eval.cells_report import cell_outcomes, cells_report
from faithrag.eval.metrics import aggregate, record_correct
from faithrag.eval.paired_report import item_slice, paired_report, sliced_ids
from faithrag.eval.plots import plot_accuracy, plot_distractors, require_plots
from faithrag.eval.rank_runner import summarize_rank_records
from faithrag.eval.run_dir import stage_names
from faithrag.eval.runs import (
    MANIFEST_FILE,
    RESULTS_FILE,
    RUN_DIR_HINT,
    Run,
    field_groups,
    find_run_dirs,
    is_ranking,
    keep_common_items,
    load_run,
    run_outcomes,
)
from faithrag.eval.stats import paired_difference, wilson_interval
from faithrag.eval.tables import ci, num, ordered, pct, table, wilson

TABLE_FILE = "report.md"
SUMMARY_FILE = "summary.json"
ACCURACY_PLOT = "accuracy.png"
DISTRACTORS_PLOT = "distractors.png"

# Metric columns shown first, in this order; any other metric follows alphabetically.
_METRIC_ORDER = ["containment", "numeric_containment", "em", "f1", "smart_em", "attack_success",
                 "ndcg@1", "ndcg@5", "ndcg@10", "contrary@1", "contrary@5", "contrary@10"]


@dataclass
class ReportFiles:
    table: Path
    summary: Path
    plots: list[Path]


def report(run_dirs: Sequence[str | Path], out_dir: str | Path, compare: bool = False,
           seed: int = 0, common: bool = False, by: str | None = None,
           data_dir: str | Path | None = None) -> ReportFiles:
    """Write report.md, summary.json and the plots for ``run_dirs`` into ``out_dir``; with
    ``by``, also each run's accuracy per value of that field (see ``field_groups``)."""
    if not run_dirs:
        raise DataError("no run directories given", hint=RUN_DIR_HINT)
    runs = [load_run(d) for d in run_dirs]
    if common:
        keep_common_items(runs)
    _assign_labels(runs)
    aggregates = [aggregate(run.records, seed=seed) for run in runs]
    comparisons = _comparisons(runs, seed) if compare else []
    by_field = _by_field(runs, by, data_dir) if by else []
    accuracy_cells = _accuracy_cells(runs, aggregates)
    distractor_points = distractor_series(runs, aggregates)
    if accuracy_cells or distractor_points:
        require_plots()  # before anything is written
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = []
    if accuracy_cells:
        plot_accuracy(accuracy_cells, out / ACCURACY_PLOT)
        plots.append(out / ACCURACY_PLOT)
    if distractor_points:
        plot_distractors(distractor_points, out / DISTRACTORS_PLOT)
        plots.append(out / DISTRACTORS_PLOT)
    table_file = out / TABLE_FILE
    table_file.write_text(_markdown(runs, aggregates, comparisons if compare else None, plots, out,
                               common, (by, by_field) if by else None), encoding="utf-8")
    summary = out / SUMMARY_FILE
    summary.write_text(json.dumps(_finite({
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "common_items": common,
        "runs": [{"run_dir": str(run.path), "label": run.label, "dataset": run.dataset,
                  "method": run.method, "model": run.manifest.get("model"),
                  "sweep": run.sweep or None, "manifest": run.manifest, "aggregate": agg,
                  "skipped_lines": [{"line": n, "message": m} for n, m in run.skipped_lines],
                  "duplicate_records": run.duplicate_records,
                  "ranking": (summarize_rank_records(run.records) if is_ranking(run)
                              else None)}
                 for run, agg in zip(runs, aggregates)],
        "comparisons": comparisons,
        "by": {"field": by, "groups": by_field} if by else None,
        "files": {"table": table_file.name, "plots": [p.name for p in plots]},
    }), indent=2, allow_nan=False, default=str), encoding="utf-8")
    return ReportFiles(table_file, summary, plots)


def _finite(value: Any) -> Any:
    """Copy of a JSON-like value with NaN/inf floats (e.g. from a manifest) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# ---------------------------------------------------------------- labels and comparisons

def _pipeline_name(run: Run) -> str:
    """Every stage the run had, in the order of registry.KINDS ("vanilla + crossval")."""
    stages = stage_names(run.manifest).values()
    return " + ".join(dict.fromkeys(str(s) for s in stages if s))


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def stage_sections(stages: list[tuple[str, str | None]]) -> set[str]:
    """The configuration sections of the named stages; a name no longer registered (an old
    run) contributes none."""
    specs = {(spec.kind, spec.name): spec for entry in registry.KINDS
             for spec in registry.stages(entry.kind)}
    return {specs[kind, name].section for kind, name in stages
            if (kind, name) in specs and specs[kind, name].section}


def _distinct_settings(run: Run, peers: list[Run]) -> dict[str, Any]:
    """Configuration values (an ablation's switch, a changed alpha) that differ from the
    defaults and among the runs on the same dataset. The stages are in the name already; speed
    settings and file paths (a per-run knowledge base) say nothing about the method."""
    defaults = _flat(Config().model_dump())
    mine = _flat(run.manifest.get("config") or {})
    others = [_flat(p.manifest.get("config") or {}) for p in peers if p is not run]
    # the sections of the stages this run used ("csrag" for csrag_choices, "rerank" for
    # crossval): a default changed by newer code in an unused section is no difference
    sections = {"generation", "retrieval"} | stage_sections(
        list(stage_names(run.manifest).items()))
    shown = {}
    for key, value in mine.items():
        if (key.split(".", 1)[0] not in sections or key not in defaults
                or value == defaults[key] or (isinstance(value, str) and "/" in value)):
            continue
        if any(o.get(key, defaults[key]) != value for o in others):
            shown[key] = value
    return shown


def _assign_labels(runs: list[Run]) -> None:
    for run in runs:
        peers = [r for r in runs if r.dataset == run.dataset]
        # sweep settings that tell this run apart: set ones, varying among the dataset's runs
        shown = {k: v for k, v in sorted(run.sweep.items()) if v is not None and (
            len(peers) == 1 or len({str(p.sweep.get(k)) for p in peers}) > 1)}
        shown.update(_distinct_settings(run, peers))
        if len({p.manifest.get("offset") or 0 for p in peers}) > 1:  # other slices of the set
            shown["offset"] = run.manifest.get("offset") or 0
        settings = ", ".join(f"{k}={v}" for k, v in shown.items())
        name = _pipeline_name(run)
        run.label = f"{name} [{settings}]" if settings else name
    for extra in (lambda r, _: str(r.manifest.get("model") or "?"), _distinct_path):
        keys = [(r.dataset, r.label) for r in runs]
        clashes = {key for key in keys if keys.count(key) > 1}
        for key in clashes:
            twins = [r for r in runs if (r.dataset, r.label) == key]
            values = [extra(r, twins) for r in twins]
            if len(set(values)) > 1:  # a model named on every twin alike tells none apart
                for run, value in zip(twins, values):
                    run.label = f"{run.label} ({value})"


def _distinct_path(run: Run, twins: list[Run]) -> str:
    """The shortest tail of the run's directory path that none of its twins shares: its name,
    or "extracted/hotpotqa-cfrag-d16" when two folders hold runs of the same name."""
    parts = run.path.resolve().parts
    others = [o.path.resolve().parts for o in twins if o is not run]
    for depth in range(1, len(parts) + 1):
        if all(o[-depth:] != parts[-depth:] for o in others):
            return "/".join(parts[-depth:])
    return str(run.path)


def _comparisons(runs: list[Run], seed: int) -> list[dict[str, Any]]:
    out = []
    for dataset in ordered(r.dataset for r in runs):
        on_dataset = [r for r in runs if r.dataset == dataset]
        for run_a, run_b in combinations(on_dataset, 2):
            scored_a = {r["id"]: c for r in run_a.records if (c := record_correct(r)) is not None}
            scored_b = {r["id"]: c for r in run_b.records if (c := record_correct(r)) is not None}
            common = [i for i in scored_a if i in scored_b]
            entry: dict[str, Any] = {"dataset": dataset, "a": run_a.label, "b": run_b.label,
                                     "n": len(common)}
            if common:
                entry.update(paired_difference([scored_a[i] for i in common],
                                               [scored_b[i] for i in common], seed=seed))
            out.append(entry)
    return out


def _metric_names(aggregates: list[dict[str, Any]]) -> list[str]:
    present = {name for agg in aggregates for name in agg["metrics"]}
    return [m for m in _METRIC_ORDER if m in present] + sorted(present - set(_METRIC_ORDER))


def _markdown(runs: list[Run], aggregates: list[dict[str, Any]],
              comparisons: list[dict[str, Any]] | None, plots: list[Path], out: Path,
              common: bool = False,
              by_field: tuple[str, list[dict[str, Any]]] | None = None) -> str:
    datasets = ordered(r.dataset for r in runs)
    labels = ordered(r.label for r in runs)
    lines = ["# faithrag evaluation report", "",
             (f"{len(runs)} run(s), {len(datasets)} dataset(s). Accuracy in %, with the 95% "
              "Wilson interval; items whose output could not be parsed or that failed count "
              "as wrong."
              + (" Every run is cut to the items all runs on its dataset hold." if common
                 else "")), "", "## Accuracy: method × dataset", ""]
    cells = {(r.label, r.dataset): agg for r, agg in zip(runs, aggregates)}
    rows = []
    for label in labels:
        row = [label]
        for dataset in datasets:
            agg = cells.get((label, dataset))
            if agg is None:
                row.append("")
            elif agg["accuracy"] is None:  # e.g. a ranking run: see the details table
                row.append("–")
            else:
                row.append(f"{pct(agg['accuracy'])}{ci(agg['accuracy_ci'])} "
                           f"(n={agg['n_scored']})")
        rows.append(row)
    lines += table(["method", *datasets], rows)

    metric_names = _metric_names(aggregates)
    lines += ["", "## Details", "",
              ("Tokens and seconds are means per item; metric columns are means over the "
               "items where the metric is defined (ratios in %, F1 and nDCG as 0–1)."), ""]
    header = ["dataset", "method", "model", "n", "accuracy [Wilson 95%]", "bootstrap 95%",
              "parse failures", "failed items", "skipped", "prompt tok", "completion tok", "s/item",
              *metric_names]
    rows = []
    for run, agg in zip(runs, aggregates):
        rows.append([
            run.dataset, run.label, str(run.manifest.get("model") or ""), str(agg["n"]),
            f"{pct(agg['accuracy'])}{ci(agg['accuracy_ci'])}",
            ci(agg["accuracy_bootstrap_ci"]).strip(),
            f"{agg['parse_failures']} ({pct(agg['parse_failure_rate'])}%)",
            str(agg["failed_items"]), str(agg["skipped_items"]),
            num(agg["mean_prompt_tokens"]), num(agg["mean_completion_tokens"]),
            num(agg["mean_seconds"], 2),
            *[_metric_cell(agg["metrics"].get(name), name) for name in metric_names],
        ])
    lines += table(header, rows)
    lines += _ranking_lines(runs, aggregates)

    if by_field is not None:
        field_name, groups = by_field
        lines += ["", f"## Accuracy by {field_name}", "",
                  "Each run's scored items grouped by their value of the field.", "",
                  *table(["dataset", "method", field_name, "n", "accuracy [Wilson 95%]"],
                          [[g["dataset"], g["label"], g["value"], str(g["n"]),
                            wilson(g["correct"], g["n"])] for g in groups])]

    if comparisons is not None:
        lines += ["", "## Paired comparisons", "",
                  ("Items scored by both runs. Difference = A − B in points, with a paired "
                   "bootstrap 95% CI; 'A only' / 'B only' count items only that run got "
                   "right; p is the exact McNemar test."), ""]
        rows = []
        for c in comparisons:
            if c["n"] == 0:
                rows.append([c["dataset"], c["a"], c["b"], "0", "", "", "", "", "", ""])
                continue
            rows.append([c["dataset"], c["a"], c["b"], str(c["n"]), pct(c["accuracy_a"]),
                         pct(c["accuracy_b"]),
                         f"{100 * c['difference']:+.1f}{ci(c['difference_ci'])}",
                         str(c["only_a"]), str(c["only_b"]), f"{c['mcnemar_p']:.3g}"])
        lines += table(["dataset", "A", "B", "n common", "acc A", "acc B", "A − B", "A only",
                         "B only", "McNemar p"], rows)

    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}]({p.relative_to(out).as_posix()})" for p in plots]

    notes = []
    for run in runs:
        if run.skipped_lines:
            first = run.skipped_lines[0]
            notes.append(f"- {run.path}: skipped {len(run.skipped_lines)} malformed line(s) "
                         f"in {RESULTS_FILE} (first: line {first[0]}: {first[1]})")
        if run.duplicate_records:
            notes.append(f"- {run.path}: {run.duplicate_records} repeated id(s); the last "
                         "record of each was used")
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def _ranking_lines(runs: list[Run], aggregates: list[dict[str, Any]]) -> list[str]:
    """Re-ranking runs (faithrag/eval/rank_runner.py): ranking quality, removals, cost."""
    rows = []
    for run, agg in zip(runs, aggregates):
        if not is_ranking(run):
            continue
        summary = summarize_rank_records(run.records)
        det, parse, cost = (summary["detection"], summary["rerank_parse"],
                            summary["rerank_cost_per_query"])
        top = run.manifest.get("answer_top")
        answer = (f"{pct(agg['accuracy'])}{ci(agg['accuracy_ci'])} "
                  f"({run.manifest.get('answer_method')}, top {top})"
                  if top and agg["accuracy"] is not None else "–")
        rows.append([
            run.dataset, run.label, str(run.manifest.get("first_stage") or ""), str(summary["n"]),
            *[_metric_cell(agg["metrics"].get(name), name, with_ci=name.endswith("@1"))
              for name in ("ndcg@1", "ndcg@5", "ndcg@10", "contrary@1", "contrary@5",
                           "contrary@10")],
            num(det["removed"] / summary["n"] if summary["n"] else None, 2),
            pct(det["precision"]), pct(det["recall"]), pct(det["pair_hit_rate"]),
            f"{parse['failed']}/{parse['repaired']}/{parse['outputs']}",
            num(cost["llm_calls"], 1),
            num(None if cost["prompt_tokens"] is None
                 else cost["prompt_tokens"] + cost["completion_tokens"], 0),
            num(cost["seconds"], 2), answer])
    if not rows:
        return []
    return ["", "## Re-ranking", "",
            ("nDCG as 0–1, contrary@k = % of contrary passages among the top k; the @1 "
             "columns carry their 95% interval (Wilson for 0/1 values, else bootstrap). Removal "
             "precision / recall: removed passages that are contrary / contrary passages "
             "removed (micro, %); pair hit: detected conflicting pairs holding a contrary "
             "passage (%). Parse: model outputs unreadable / repaired / read. LLM calls, "
             "tokens and seconds are of the re-ranking stage alone, per query; the answer "
             "column is the downstream accuracy from the top-k re-ranked passages."), "",
            *table(["dataset", "re-ranker", "first stage", "n", "nDCG@1", "nDCG@5", "nDCG@10",
                     "contrary@1", "contrary@5", "contrary@10", "removed/query",
                     "removal precision", "removal recall", "pair hit", "parse",
                     "LLM calls/query", "tokens/query", "s/query", "answer accuracy"], rows)]


def _metric_cell(entry: dict[str, Any] | None, name: str, with_ci: bool = False) -> str:
    if entry is None or entry["mean"] is None:
        return "–"
    interval = entry.get("ci") if with_ci else None
    if name.startswith("ndcg") or name == "f1":
        return f"{entry['mean']:.3f}" + ("" if interval is None
                                         else f" [{interval[0]:.2f}, {interval[1]:.2f}]")
    return pct(entry["mean"]) + ci(interval)


# ---------------------------------------------------------------- plot data

def _accuracy_cells(runs: list[Run], aggregates: list[dict[str, Any]]
                    ) -> dict[tuple[str, str], tuple[float, Sequence[float]]]:
    """(label, dataset) -> (accuracy, Wilson CI) of the runs without a sweep that have an
    accuracy: the bars of the accuracy plot."""
    return {(r.label, r.dataset): (agg["accuracy"], agg["accuracy_ci"])
            for r, agg in zip(runs, aggregates) if not r.sweep and agg["accuracy"] is not None}


def distractor_series(runs: list[Run], aggregates: list[dict[str, Any]]
                      ) -> dict[str, dict[str, list[tuple[float, float, Sequence[float]]]]]:
    """Per dataset, one line per pipeline, settings (an ablation's switch) and model: the
    (injected distractors, accuracy, CI) of its runs."""
    points: dict[str, dict[str, list[tuple[float, float, Sequence[float]]]]] = {}
    for run, agg in zip(runs, aggregates):
        count = run.sweep.get("distractors")
        if not isinstance(count, (int, float)) or isinstance(count, bool) or not math.isfinite(
                count) or agg["accuracy"] is None:
            continue
        settings = _distinct_settings(run, [r for r in runs if r.dataset == run.dataset])
        series = _pipeline_name(run) + (
            f" [{', '.join(f'{k}={v}' for k, v in settings.items())}]" if settings else "")
        model = run.manifest.get("model")
        series += f" ({model})" if model else ""
        points.setdefault(run.dataset, {}).setdefault(series, []).append(
            (count, agg["accuracy"], agg["accuracy_ci"]))
    return points


# ---------------------------------------------------------------- slices of a run

def _by_field(runs: list[Run], field_path: str, data_dir: str | Path | None
              ) -> list[dict[str, Any]]:
    out = []
    for run in runs:
        scored = {r["id"]: c for r in run.records if (c := record_correct(r)) is not None}
        for value, ids in field_groups(run, field_path, list(scored), data_dir).items():
            correct = sum(scored[i] for i in ids)
            out.append({"dataset": run.dataset, "label": run.label, "value": value,
                        "n": len(ids), "correct": correct, "accuracy": correct / len(ids),
                        "accuracy_ci": wilson_interval(correct, len(ids))})
    return out


# the public names of the evaluation reports, importable from here as before their split
__all__ = ["MANIFEST_FILE", "RESULTS_FILE", "RUN_DIR_HINT", "ReportFiles", "Run",
           "cell_outcomes", "cells_report", "distractor_series", "field_groups",
           "find_run_dirs", "item_slice", "keep_common_items", "load_run", "paired_report",
           "report", "run_outcomes", "sliced_ids"]

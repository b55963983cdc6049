"""Reports over evaluation run directories: a markdown table, summary.json and PNG plots.

A run directory holds two files written by the runner.

``manifest.json``::

    {"dataset": str, "method": str,                      # required
     "model": str, "model_sha256": str, "dataset_sha256": str, "config": dict,
     "code_version": str, "limit": int | null, "seed": int, "created": str (ISO 8601),
     "offset": int,                                      # items skipped (absent before: 0)
     "platform": str,                                    # CPU and llama.cpp build
     "code_versions": [str], "platforms": [str],         # a run resumed under others
     "sweep": {"distractors": 4, ...}}                   # optional: the swept setting(s)

``results.jsonl``, one JSON record per item, appended as items finish::

    {"id": str, "dataset": str, "method": str,
     "prediction": str | null, "gold": [str],
     "correct": bool | null,            # null: no correctness (ranking items, or not scored)
     "parse_status": "ok" | "failed" | "error" | "skipped",
                                        # failed: output not parsed; error: the item raised;
                                        # skipped: no form of the item the method can answer
     "error": str | null,
     "prompt_tokens": int, "completion_tokens": int, "seconds": float,
     "metrics": {"containment": 0|1, "numeric_containment": 0|1, "em": 0|1, "f1": float,
                 "smart_em": 0|1, "attack_success": 0|1, "ndcg@1": float | null,
                 "contrary@1": float | null, ...},
     "trace": {...Trace.summary()...}, "extra": {...}}

Reading rules: a line that is not a JSON object with an "id" (e.g. a line cut short by a crash) is
skipped and reported; when an id occurs more than once (a resumed run) the last record wins and
the duplicates are counted. Items with parse_status "failed" or "error" and a null ``correct``
count as wrong (see metrics.record_correct).

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
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from statistics import median
from typing import Any

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import DataError
from faithrag.eval.datasets import load_dataset
from faithrag.eval.metrics import aggregate, cell_correct, record_correct
from faithrag.eval.plots import plot_accuracy, plot_distractors, require_plots
from faithrag.eval.rank_runner import summarize_rank_records
from faithrag.eval.ranking_metrics import ranking_metrics
from faithrag.eval.run_dir import stage_names
from faithrag.eval.stats import bootstrap_ci, paired_difference, wilson_interval

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "manifest.json"
TABLE_FILE = "report.md"
SUMMARY_FILE = "summary.json"
ACCURACY_PLOT = "accuracy.png"
DISTRACTORS_PLOT = "distractors.png"
RUN_DIR_HINT = "a run directory holds manifest.json and results.jsonl, as written by faithrag eval"

# Metric columns shown first, in this order; any other metric follows alphabetically.
_METRIC_ORDER = ["containment", "numeric_containment", "em", "f1", "smart_em", "attack_success",
                 "ndcg@1", "ndcg@5", "ndcg@10", "contrary@1", "contrary@5", "contrary@10"]


@dataclass
class Run:
    path: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)
    duplicate_records: int = 0
    label: str = ""

    @property
    def dataset(self) -> str:
        return str(self.manifest["dataset"])

    @property
    def method(self) -> str:
        return str(self.manifest["method"])

    @property
    def sweep(self) -> dict[str, Any]:
        sweep = self.manifest.get("sweep")
        return sweep if isinstance(sweep, dict) else {}


@dataclass
class ReportFiles:
    table: Path
    summary: Path
    plots: list[Path]


def load_run(run_dir: str | Path) -> Run:
    """Read one run directory (see the module docstring for the rules)."""
    path = Path(run_dir)
    manifest_path, results_path = path / MANIFEST_FILE, path / RESULTS_FILE
    if not manifest_path.is_file() or not results_path.is_file():
        raise DataError(f"{path} is not a run directory (needs {MANIFEST_FILE} and "
                        f"{RESULTS_FILE})", hint=RUN_DIR_HINT)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{manifest_path} is not valid JSON: {exc}", hint=RUN_DIR_HINT) from None
    if not isinstance(manifest, dict) or not all(
            isinstance(manifest.get(k), str) and manifest[k] for k in ("dataset", "method")):
        raise DataError(f"{manifest_path} lacks a 'dataset' or 'method' string",
                        hint=RUN_DIR_HINT)
    by_id: dict[str, dict[str, Any]] = {}
    skipped: list[tuple[int, str]] = []
    duplicates = 0
    with results_path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                skipped.append((number, f"invalid JSON: {exc}"))
                continue
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                skipped.append((number, "not a record with a string 'id'"))
                continue
            if record["id"] in by_id:
                duplicates += 1
                del by_id[record["id"]]  # keep the later record, in its position
            by_id[record["id"]] = record
    return Run(path, manifest, list(by_id.values()), skipped, duplicates)


def run_outcomes(run_arg: str, default_cell: str | None = None) -> tuple[Run, dict[str, bool]]:
    """A run and its item id -> right map, over the items it scored. `run_arg` is a run
    directory, or `RUN@CELL` for one ablation cell of a run made with `csrag.ablation_grid`
    (`default_cell` when none is written). ValueError when the run has no such cell."""
    run_dir, _, cell = run_arg.partition("@")
    run, cell = load_run(run_dir), cell or default_cell
    try:
        return run, {r["id"]: c for r in run.records
                     if (c := cell_correct(r, cell) if cell else record_correct(r)) is not None}
    except ValueError as err:
        raise ValueError(f"{run_dir} {err}") from None


def find_run_dirs(paths: Sequence[str | Path]) -> list[Path]:
    """Each path that is a run directory, or else its sub-directories that are (sorted)."""
    found: list[Path] = []
    for given in map(Path, paths):
        if (given / RESULTS_FILE).is_file():
            found.append(given)
            continue
        children = sorted(p.parent for p in given.glob(f"*/{RESULTS_FILE}"))
        if not children:
            raise DataError(f"no run directory at or under {given}", hint=RUN_DIR_HINT)
        found.extend(children)
    return found


def keep_common_items(runs: list[Run]) -> None:
    """Cut every run to the item ids that all runs on its dataset hold (in place)."""
    for dataset in _ordered(r.dataset for r in runs):
        same = [r for r in runs if r.dataset == dataset]
        shared = set.intersection(*({rec["id"] for rec in r.records} for r in same))
        for run in same:
            run.records = [rec for rec in run.records if rec["id"] in shared]


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
    table = out / TABLE_FILE
    table.write_text(_markdown(runs, aggregates, comparisons if compare else None, plots, out,
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
                  "ranking": (summarize_rank_records(run.records) if _is_ranking(run)
                              else None)}
                 for run, agg in zip(runs, aggregates)],
        "comparisons": comparisons,
        "by": {"field": by, "groups": by_field} if by else None,
        "files": {"table": table.name, "plots": [p.name for p in plots]},
    }), indent=2, allow_nan=False, default=str), encoding="utf-8")
    return ReportFiles(table, summary, plots)


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
    for dataset in _ordered(r.dataset for r in runs):
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


# ---------------------------------------------------------------- markdown

def _ordered(values) -> list:
    return list(dict.fromkeys(values))


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _ci(interval: Sequence[float] | None) -> str:
    return "" if interval is None else f" [{_pct(interval[0])}, {_pct(interval[1])}]"


def _num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(map(_cell, header)) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(_cell, row)) + " |" for row in rows]
    return lines


def _metric_names(aggregates: list[dict[str, Any]]) -> list[str]:
    present = {name for agg in aggregates for name in agg["metrics"]}
    return [m for m in _METRIC_ORDER if m in present] + sorted(present - set(_METRIC_ORDER))


def _markdown(runs: list[Run], aggregates: list[dict[str, Any]],
              comparisons: list[dict[str, Any]] | None, plots: list[Path], out: Path,
              common: bool = False,
              by_field: tuple[str, list[dict[str, Any]]] | None = None) -> str:
    datasets = _ordered(r.dataset for r in runs)
    labels = _ordered(r.label for r in runs)
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
                row.append(f"{_pct(agg['accuracy'])}{_ci(agg['accuracy_ci'])} "
                           f"(n={agg['n_scored']})")
        rows.append(row)
    lines += _table(["method", *datasets], rows)

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
            f"{_pct(agg['accuracy'])}{_ci(agg['accuracy_ci'])}",
            _ci(agg["accuracy_bootstrap_ci"]).strip(),
            f"{agg['parse_failures']} ({_pct(agg['parse_failure_rate'])}%)",
            str(agg["failed_items"]), str(agg["skipped_items"]),
            _num(agg["mean_prompt_tokens"]), _num(agg["mean_completion_tokens"]),
            _num(agg["mean_seconds"], 2),
            *[_metric_cell(agg["metrics"].get(name), name) for name in metric_names],
        ])
    lines += _table(header, rows)
    lines += _ranking_lines(runs, aggregates)

    if by_field is not None:
        field_name, groups = by_field
        lines += ["", f"## Accuracy by {field_name}", "",
                  "Each run's scored items grouped by their value of the field.", "",
                  *_table(["dataset", "method", field_name, "n", "accuracy [Wilson 95%]"],
                          [[g["dataset"], g["label"], g["value"], str(g["n"]),
                            _wilson(g["correct"], g["n"])] for g in groups])]

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
            rows.append([c["dataset"], c["a"], c["b"], str(c["n"]), _pct(c["accuracy_a"]),
                         _pct(c["accuracy_b"]),
                         f"{100 * c['difference']:+.1f}{_ci(c['difference_ci'])}",
                         str(c["only_a"]), str(c["only_b"]), f"{c['mcnemar_p']:.3g}"])
        lines += _table(["dataset", "A", "B", "n common", "acc A", "acc B", "A − B", "A only",
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


def _is_ranking(run: Run) -> bool:
    return run.manifest.get("kind") == "rank"


def _ranking_lines(runs: list[Run], aggregates: list[dict[str, Any]]) -> list[str]:
    """Re-ranking runs (faithrag/eval/rank_runner.py): ranking quality, removals, cost."""
    rows = []
    for run, agg in zip(runs, aggregates):
        if not _is_ranking(run):
            continue
        summary = summarize_rank_records(run.records)
        det, parse, cost = (summary["detection"], summary["rerank_parse"],
                            summary["rerank_cost_per_query"])
        top = run.manifest.get("answer_top")
        answer = (f"{_pct(agg['accuracy'])}{_ci(agg['accuracy_ci'])} "
                  f"({run.manifest.get('answer_method')}, top {top})"
                  if top and agg["accuracy"] is not None else "–")
        rows.append([
            run.dataset, run.label, str(run.manifest.get("first_stage") or ""), str(summary["n"]),
            *[_metric_cell(agg["metrics"].get(name), name, with_ci=name.endswith("@1"))
              for name in ("ndcg@1", "ndcg@5", "ndcg@10", "contrary@1", "contrary@5",
                           "contrary@10")],
            _num(det["removed"] / summary["n"] if summary["n"] else None, 2),
            _pct(det["precision"]), _pct(det["recall"]), _pct(det["pair_hit_rate"]),
            f"{parse['failed']}/{parse['repaired']}/{parse['outputs']}",
            _num(cost["llm_calls"], 1),
            _num(None if cost["prompt_tokens"] is None
                 else cost["prompt_tokens"] + cost["completion_tokens"], 0),
            _num(cost["seconds"], 2), answer])
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
            *_table(["dataset", "re-ranker", "first stage", "n", "nDCG@1", "nDCG@5", "nDCG@10",
                     "contrary@1", "contrary@5", "contrary@10", "removed/query",
                     "removal precision", "removal recall", "pair hit", "parse",
                     "LLM calls/query", "tokens/query", "s/query", "answer accuracy"], rows)]


def _metric_cell(entry: dict[str, Any] | None, name: str, with_ci: bool = False) -> str:
    if entry is None or entry["mean"] is None:
        return "–"
    ci = entry.get("ci") if with_ci else None
    if name.startswith("ndcg") or name == "f1":
        return f"{entry['mean']:.3f}" + ("" if ci is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]")
    return _pct(entry["mean"]) + _ci(ci)


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

ITEM_PREFIX = "item."


def field_groups(run: Run, field_path: str, ids: Sequence[str],
                 data_dir: str | Path | None = None) -> dict[str, list[str]]:
    """``ids`` grouped by their record's value of ``field_path``, groups in order of first
    appearance: a dotted path into the record (``parse_status``, ``extra.cfrag.decision``), or,
    starting with ``item.``, into the dataset's item read from the data directory
    (``item.conflict_type``, ``item.source``, ``item.meta.KEY``). A missing value is grouped as
    "–"; a list or dict value as its JSON."""
    if field_path.startswith(ITEM_PREFIX):
        items = {item.id: item for item in load_dataset(run.dataset, data_dir).items}
        sources = {i: items.get(i) for i in ids}
        path = field_path[len(ITEM_PREFIX):].split(".")
    else:
        records = {r["id"]: r for r in run.records}
        sources = {i: records.get(i) for i in ids}
        path = field_path.split(".")
    groups: dict[str, list[str]] = {}
    for item_id, value in sources.items():
        for key in path:
            value = (value.get(key) if isinstance(value, dict)
                     else getattr(value, key, None) if value is not None else None)
        text = ("–" if value is None else value if isinstance(value, str)
                else json.dumps(value, ensure_ascii=False, default=str))
        groups.setdefault(text, []).append(item_id)
    return groups


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


# ---------------------------------------------------------------- one run against others, paired

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
            rows.append([arg, where, str(len(ids)), _wilson(sum(a[i] for i in ids), len(ids)),
                         _wilson(sum(b[i] for i in ids), len(ids)), _points(d),
                         f"{d['only_a']} / {d['only_b']}", f"{d['mcnemar_p']:.2g}"])
    lines += _table(["B", by or "items", "n", "A", "B", "A − B", "A only / B only",
                     "McNemar p"], rows)
    if _is_ranking(run_a):
        lines += _ranking_pairs(run_a, [(arg, run_b) for arg, (run_b, _) in others], data_dir,
                                seed)
    return "\n".join(lines) + "\n"


def _wilson(successes: int, n: int) -> str:
    return f"{_pct(successes / n)}{_ci(wilson_interval(successes, n))}"


def _points(d: dict[str, Any]) -> str:
    lo, hi = d["difference_ci"]
    return f"{100 * d['difference']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


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
            row += [_pct(d["accuracy_a"]), _pct(d["accuracy_b"]),
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
            *_table(["B", "shared", "nDCG@1 A", "nDCG@1 B", "A − B", "contrary@1 A",
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
            f"{_pct(_mean_of(bool(b[i].contrary1) for i in ids))} → "
            f"{_pct(_mean_of(bool(m['contrary@1']) for m in pruned))} → "
            f"{_pct(_mean_of(bool(a[i].contrary1) for i in ids))} %")


# ---------------------------------------------------------------- ablation cells

UNBIASED_CELL = "a=0 b=0"
CACHED_BELOW = 0.5  # seconds: a facts or paraphrase step this short was read from the cache


def cell_outcomes(records: Sequence[dict[str, Any]]) -> tuple[dict[str, list[bool]], int]:
    """Per ablation cell (of a run made with `csrag.ablation_grid`), whether each item was
    answered right, in record order; and how many items failed before their options were
    scored (wrong in every cell). Items without a two-way choice (skipped) are left out; the
    cells are those every scored item has (a run made before a cell was added lacks it)."""
    grids = [v for r in records if (v := (r.get("extra") or {}).get("variants"))]
    labels = [label for label in (grids[0] if grids else {})
              if all(label in v for v in grids)]
    outcomes: dict[str, list[bool]] = {label: [] for label in labels}
    failed = 0
    for record in records:
        if record.get("parse_status") == "skipped":
            continue
        if not (record.get("extra") or {}).get("variants"):
            failed += 1
        for label, seen in outcomes.items():
            seen.append(bool(cell_correct(record, label)))
    return outcomes, failed


def cells_report(run_dirs: Sequence[str | Path], seed: int = 0) -> str:
    """Markdown, per run made with `csrag.ablation_grid`: each cell's accuracy (Wilson 95%) and
    the cell against the unbiased cell `a=0 b=0` (the same prompt without the control): A − B
    with a paired bootstrap CI, items gained / lost, exact McNemar p and the share of the
    unbiased cell's errors removed, net; then the time per item (facts step, scoring step and
    their ratio, medians, cached facts counted apart) and the cost (scoring prompt tokens, the
    paraphrase step where the run has one, whole-item seconds). DataError for a run without
    cells."""
    lines = []
    for run_dir in run_dirs:
        run = load_run(run_dir)
        outcomes, failed = cell_outcomes(run.records)
        base = outcomes.get(UNBIASED_CELL)
        if not base:
            raise DataError(f"{run.path} has no scored ablation cells",
                            hint="run it with --set csrag.ablation_grid=true")
        base_errors = len(base) - sum(base)
        rows = []
        for label, seen in outcomes.items():
            acc = _wilson(sum(seen), len(seen))
            if label == UNBIASED_CELL:
                rows.append([f"{label} (no control)", acc, "", "", "", ""])
                continue
            d = paired_difference(seen, base, seed=seed)
            removed = (f"{100 * (d['only_a'] - d['only_b']) / base_errors:.0f} %"
                       if base_errors else "–")
            rows.append([label, acc, _points(d), f"{d['only_a']} / {d['only_b']}",
                         f"{d['mcnemar_p']:.2g}", removed])
        lines += [f"## {run.path.name} (n = {len(base)}, failed items {failed})", "",
                  *_table(["cell", "accuracy", f"against {UNBIASED_CELL}", "gained / lost",
                           "McNemar p", "errors removed"], rows),
                  "", _timing_line(run.records), "", _cost_line(run.records), ""]
    return "\n".join(lines)


def _stage_seconds(record: dict[str, Any], stage: str) -> float:
    stages = (record.get("trace") or {}).get("stages", [])
    return sum(s["seconds"] for s in stages if s["stage"] == stage)


def _grid_scored(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if (r.get("extra") or {}).get("variants")]


def _timing_line(records: Sequence[dict[str, Any]]) -> str:
    timed = [(_stage_seconds(r, "facts"), _stage_seconds(r, "generate"))
             for r in _grid_scored(records)]
    fresh = [(f, g) for f, g in timed if f >= CACHED_BELOW]  # facts generated, not cached
    if not timed:
        return "no timed items"
    line = f"Time per item (median): scoring {median(g for _, g in timed):.1f} s; "
    if not fresh:
        return line + "facts all cached."
    return line + (f"facts {median(f for f, _ in fresh):.1f} s ({len(fresh)} generated, "
                   f"{len(timed) - len(fresh)} cached); (facts + scoring) / scoring "
                   f"{median((f + g) / g for f, g in fresh if g > 0):.2f}×.")


def _cost_line(records: Sequence[dict[str, Any]]) -> str:
    scored = _grid_scored(records)
    if not scored:
        return "no timed items"
    tokens = [sum(s.get("prompt_tokens", 0) for s in r["trace"]["stages"]
                  if s["stage"] == "generate") for r in scored]
    line = f"Scoring prompt tokens (mean) {sum(tokens) / len(tokens):.0f}; "
    if any(s["stage"] == "paraphrase" for r in scored for s in r["trace"]["stages"]):
        fresh = [r for r in scored if _stage_seconds(r, "paraphrase") >= CACHED_BELOW]
        line += (f"paraphrases {median(_stage_seconds(r, 'paraphrase') for r in fresh):.1f} s "
                 f"({len(fresh)} generated, {len(scored) - len(fresh)} cached), whole item "
                 f"with them generated {median(r['seconds'] for r in fresh):.1f} s; "
                 if fresh else "paraphrases all cached; ")
    return line + f"whole item {median(r['seconds'] for r in scored):.1f} s (median)."

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
     "metrics": {"containment": 0|1, "em": 0|1, "f1": float, "smart_em": 0|1,
                 "attack_success": 0|1, "ndcg@1": float | null, "contrary@1": float | null, ...},
     "trace": {...Trace.summary()...}, "extra": {...}}

Reading rules: a line that is not a JSON object with an "id" (e.g. a line cut short by a crash) is
skipped and reported; when an id occurs more than once (a resumed run) the last record wins and
the duplicates are counted. Items with parse_status "failed" or "error" and a null ``correct``
count as wrong (see metrics.record_correct).

``report(run_dirs, out_dir, compare=False, common=False)`` writes to ``out_dir``:

- ``report.md``: accuracy per method x dataset (with 95% Wilson CI and n), a detail table (n,
  accuracy, bootstrap CI, parse failures, failed and skipped items, mean prompt/completion tokens
  and seconds
  per item, and every per-item metric present, e.g. containment, EM, F1, nDCG@k, contrary@k),
  the paired comparisons when ``compare`` is set, and notes on skipped lines;
- ``summary.json``: the same figures, plus each run's manifest;
- ``accuracy.png``: grouped bars of accuracy by method per dataset, Wilson 95% error bars
  (runs without a sweep);
- ``distractors.png``: accuracy against ``sweep.distractors`` per method, one panel per dataset
  (only when some run carries that value).

The tables are written here; the plots are drawn by faithrag/eval/plots.py.

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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import DataError
from faithrag.eval.metrics import aggregate, cell_correct, record_correct
from faithrag.eval.plots import plot_accuracy, plot_distractors
from faithrag.eval.rank_runner import summarize_rank_records
from faithrag.eval.stats import paired_difference

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "manifest.json"
TABLE_FILE = "report.md"
SUMMARY_FILE = "summary.json"
ACCURACY_PLOT = "accuracy.png"
DISTRACTORS_PLOT = "distractors.png"
RUN_DIR_HINT = "a run directory holds manifest.json and results.jsonl, as written by faithrag eval"

# Metric columns shown first, in this order; any other metric follows alphabetically.
_METRIC_ORDER = ["containment", "em", "f1", "smart_em", "attack_success",
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
           seed: int = 0, common: bool = False) -> ReportFiles:
    """Write report.md, summary.json and the plots for ``run_dirs`` into ``out_dir``."""
    if not run_dirs:
        raise DataError("no run directories given", hint=RUN_DIR_HINT)
    runs = [load_run(d) for d in run_dirs]
    if common:
        keep_common_items(runs)
    _assign_labels(runs)
    aggregates = [aggregate(run.records, seed=seed) for run in runs]
    comparisons = _comparisons(runs, seed) if compare else []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = []
    accuracy_cells = _accuracy_cells(runs, aggregates)
    if accuracy_cells:
        plot_accuracy(accuracy_cells, out / ACCURACY_PLOT)
        plots.append(out / ACCURACY_PLOT)
    distractor_points = distractor_series(runs, aggregates)
    if distractor_points:
        plot_distractors(distractor_points, out / DISTRACTORS_PLOT)
        plots.append(out / DISTRACTORS_PLOT)
    table = out / TABLE_FILE
    table.write_text(_markdown(runs, aggregates, comparisons if compare else None, plots, out,
                               common), encoding="utf-8")
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
    stages = [run.method, run.manifest.get("rerank"), run.manifest.get("verify")]
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
    specs = {(spec.kind, spec.name): spec for kind in registry.KINDS
             for spec in registry.stages(kind)}
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
        [("generator", run.method), ("reranker", run.manifest.get("rerank")),
         ("verifier", run.manifest.get("verify"))])
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
              common: bool = False) -> str:
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

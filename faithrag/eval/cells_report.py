"""Every ablation cell of a run made with `csrag.ablation_grid` against its unbiased cell
(`cells_report`), with the time and tokens per item; `cell_outcomes` reads a run's cells."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import Any

from faithrag.errors import DataError
from faithrag.eval.metrics import cell_correct
from faithrag.eval.runs import load_run
from faithrag.eval.stats import paired_difference
from faithrag.eval.tables import points, table, wilson

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
            acc = wilson(sum(seen), len(seen))
            if label == UNBIASED_CELL:
                rows.append([f"{label} (no control)", acc, "", "", "", ""])
                continue
            d = paired_difference(seen, base, seed=seed)
            removed = (f"{100 * (d['only_a'] - d['only_b']) / base_errors:.0f} %"
                       if base_errors else "–")
            rows.append([label, acc, points(d), f"{d['only_a']} / {d['only_b']}",
                         f"{d['mcnemar_p']:.2g}", removed])
        lines += [f"## {run.path.name} (n = {len(base)}, failed items {failed})", "",
                  *table(["cell", "accuracy", f"against {UNBIASED_CELL}", "gained / lost",
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

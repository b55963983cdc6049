"""Accuracy of every CSRAG ablation cell, from csrag_choices runs made with
`--set csrag.ablation_grid=true` (each item's options scored under every cell's bias from one
forward pass; see `faithrag.methods.csrag.ABLATION_GRID`).

Per run: each cell's accuracy with its Wilson interval, and the cell paired with the unbiased
cell `a=0 b=0` (plain choice scoring, the same prompt without the control): difference with a
paired bootstrap interval, items gained / lost, exact McNemar p, and the share of the unbiased
cell's errors the cell removes. Items that failed (error) count as wrong in every cell.
Below each table, the time per item: the facts step, the scoring step (which alone is plain
choice scoring), and their ratio, CSRAG's latency over the same-prompt baseline's, as medians
over the items of the run (facts served from the cache take ~0 s and are counted apart). Then
the scoring step's mean prompt tokens, the paraphrase step where the run has one (the enhanced
context; cached paraphrases counted apart like facts) and the whole item's median seconds.

    python benchmarks/csrag_grid.py runs/csrag/grid/* > runs/csrag/grid/report.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import median

from faithrag.eval.metrics import cell_correct
from faithrag.eval.stats import paired_difference, wilson_interval
from faithrag.methods.csrag import ABLATION_GRID

BASELINE = "a=0 b=0"


def cell_outcomes(records: list[dict]) -> tuple[dict[str, list[bool]], int]:
    """Per cell label, whether each scored item was answered right; and how many failed. The
    cells are those of the grid that every scored item has (a run made before a cell was added
    to the grid lacks it)."""
    scored = [(r.get("extra") or {}).get("variants") for r in records]
    scored = [variants for variants in scored if variants]
    outcomes: dict[str, list[bool]] = {cell.label: [] for cell in ABLATION_GRID
                                       if all(cell.label in v for v in scored)}
    failed = 0
    for record in records:
        if record.get("parse_status") == "skipped":
            continue  # no two-way choice for this item
        if not was_scored(record):
            failed += 1
        for label, seen in outcomes.items():
            seen.append(bool(cell_correct(record, label)))
    return outcomes, failed


def load_records(run: Path) -> list[dict]:
    with open(run / "results.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


CACHED_BELOW = 0.5  # seconds: a facts or paraphrase step this short was read from the cache


def was_scored(record: dict) -> bool:
    """The item reached the scoring of its options (it failed before otherwise)."""
    return bool((record.get("extra") or {}).get("variants"))


def stage_seconds(record: dict, stage: str) -> float:
    stages = (record.get("trace") or {}).get("stages", [])
    return sum(s["seconds"] for s in stages if s["stage"] == stage)


def timing_line(records: list[dict]) -> str:
    timed = [(stage_seconds(r, "facts"), stage_seconds(r, "generate")) for r in records
             if was_scored(r)]
    fresh = [(f, g) for f, g in timed if f >= CACHED_BELOW]  # facts generated, not cached
    if not timed:
        return "no timed items"
    line = (f"time per item (median): scoring {median(g for _, g in timed):.1f} s; ")
    if not fresh:
        return line + "facts all cached"
    return line + (f"facts {median(f for f, _ in fresh):.1f} s ({len(fresh)} generated, "
                   f"{len(timed) - len(fresh)} cached); (facts + scoring) / scoring "
                   f"{median((f + g) / g for f, g in fresh if g > 0):.2f}×")


def cost_line(records: list[dict]) -> str:
    """Scoring prompt tokens, the paraphrase step (generated vs cached) and whole-item seconds."""
    scored = [r for r in records if was_scored(r)]
    if not scored:
        return "no timed items"
    tokens = [sum(s.get("prompt_tokens", 0) for s in r["trace"]["stages"]
                  if s["stage"] == "generate") for r in scored]
    line = f"scoring prompt tokens (mean) {sum(tokens) / len(tokens):.0f}; "
    if any(s["stage"] == "paraphrase" for r in scored for s in r["trace"]["stages"]):
        fresh = [r for r in scored if stage_seconds(r, "paraphrase") >= CACHED_BELOW]
        line += (f"paraphrases {median(stage_seconds(r, 'paraphrase') for r in fresh):.1f} s "
                 f"({len(fresh)} generated, {len(scored) - len(fresh)} cached), whole item "
                 f"with them generated {median(r['seconds'] for r in fresh):.1f} s; "
                 if fresh else "paraphrases all cached; ")
    return line + f"whole item {median(r['seconds'] for r in scored):.1f} s (median)"


def run_table(run: Path) -> list[str]:
    records = load_records(run)
    outcomes, failed = cell_outcomes(records)
    base = outcomes[BASELINE]
    if not base:
        return [f"### {run.name}", "", "no scored items", ""]
    base_errors = len(base) - sum(base)
    lines = [f"### {run.name} (n = {len(base)}, failed items {failed})", "",
             ("| cell | accuracy [95% CI] | vs a=0 b=0 [95% CI] | gained / lost | McNemar p "
             "| errors removed |"), "|---|---|---|---|---:|---:|"]
    for label, seen in outcomes.items():
        low, high = wilson_interval(sum(seen), len(seen))
        acc = f"{100 * sum(seen) / len(seen):.1f} [{100 * low:.1f}, {100 * high:.1f}]"
        if label == BASELINE:
            lines.append(f"| {label} (no control) | {acc} | | | | |")
            continue
        paired = paired_difference(seen, base)
        d_low, d_high = paired["difference_ci"]
        removed = (f"{100 * (paired['only_a'] - paired['only_b']) / base_errors:.0f} %"
                   if base_errors else "n/a")
        lines.append(f"| {label} | {acc} | {100 * paired['difference']:+.1f} "
                     f"[{100 * d_low:+.0f}, {100 * d_high:+.0f}] | {paired['only_a']} / "
                     f"{paired['only_b']} | {paired['mcnemar_p']:.2f} | {removed} |")
    return [*lines, "", timing_line(records), cost_line(records), ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="csrag_choices run directories")
    args = parser.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / "results.jsonl").is_file()]
    if missing:
        print(f"no results.jsonl in: {', '.join(missing)}", file=sys.stderr)
        return 2
    for run in args.runs:
        print("\n".join(run_table(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How often CSRAG's bias lowers the gold option's probability, split by whether the gold
answer has capitals, for the default bias and for the case-variant cell.

On the cofaithfulqa sets the options are shown lower-cased (`datasets.two_way_choices`), while
the token sets follow the passage's spelling, so a capitalised answer can miss the boost its
passage earns. This reads grid runs (`--set csrag.ablation_grid=true`) and, per run, counts the
items on which a cell gives the gold option a lower probability than the unbiased cell `a=0 b=0`,
among the items whose gold answer (as the source spells it) has capitals and among the rest.
Items without scored options (skipped or failed) are left out. The gold answers are read from
the data (banked records do not hold them).

    python benchmarks/csrag_case_effect.py results/csrag/json-scored/cofaithfulqa_*-original
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faithrag.eval.datasets import load_dataset
from faithrag.eval.report import load_run

BASELINE = "a=0 b=0"
CELLS = ("a=-1 b=3", "a=-1 b=3 +case")


def gold_probability(record: dict, cell: str) -> float:
    variants = record["extra"]["variants"]
    return variants[cell]["probabilities"][record["gold_index"]]


def has_capitals(answer: str) -> bool:
    return any(ch.isupper() for ch in answer)


def lowered_counts(records: list[dict], answers: dict[str, str],
                   cell: str) -> dict[bool, tuple[int, int]]:
    """For items with and without capitals in the gold answer: (lowered, total)."""
    counts = {True: [0, 0], False: [0, 0]}
    for record in records:
        variants = (record.get("extra") or {}).get("variants") or {}
        if cell not in variants or BASELINE not in variants:
            continue
        group = counts[has_capitals(answers[record["id"]])]
        group[1] += 1
        group[0] += gold_probability(record, cell) < gold_probability(record, BASELINE)
    return {group: (lowered, total) for group, (lowered, total) in counts.items()}


def share(lowered: int, total: int) -> str:
    return f"{lowered} / {total} ({100 * lowered / total:.0f} %)" if total else "–"


def report(runs: list[Path], data: str | None = None) -> str:
    lines = ["| run | cell | gold lowered, answer with capitals | gold lowered, answer without |",
             "|---|---|---|---|"]
    for run_dir in runs:
        run = load_run(run_dir)
        answers = {item.id: item.answer for item in load_dataset(run.dataset, root=data)}
        for cell in CELLS:
            counts = lowered_counts(run.records, answers, cell)
            lines.append(f"| {run_dir.name} | {cell} | {share(*counts[True])} "
                         f"| {share(*counts[False])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders made with the ablation grid")
    parser.add_argument("--data", default=None, help="data root (default ../shared/data)")
    args = parser.parse_args(argv)
    missing = [str(run) for run in args.runs
               if not ((run / "results.jsonl").is_file() and (run / "manifest.json").is_file())]
    if missing:
        parser.error(f"no results.jsonl and manifest.json in: {', '.join(missing)}")
    print(report(args.runs, args.data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

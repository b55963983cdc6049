"""Two runs compared on slices of the dataset's item order (e.g. the items a change was tuned on
against the items after them), paired, with accuracies, a bootstrap CI of the difference and
McNemar's exact p. The slices index the dataset order that `faithrag eval --limit` takes items
in, so "0:20" is the first 20 items whatever order the records were written in.

    python benchmarks/paired_slices.py results/cfrag/extracted/hotpotqa_distractor-cfrag-d16 \
      results/cfrag/main/hotpotqa_distractor-vanilla-d16 0:20 20:100 0:100

A run written `DIR@CELL` stands for one ablation cell of a run made with
`csrag.ablation_grid` (e.g. `runs/x@a=0 b=0`: that cell's pick, from the same forward pass).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from faithrag.eval.datasets import load_dataset
from faithrag.eval.report import run_outcomes
from faithrag.eval.stats import paired_difference, wilson_interval

T = TypeVar("T")


def scored(run_arg: str) -> tuple[str, dict[str, bool]]:
    try:
        run, outcomes = run_outcomes(run_arg)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    return run.dataset, outcomes


def parse_slice(text: str) -> slice:
    lo, sep, hi = text.partition(":")
    if not sep or not lo.isdigit() or not hi.isdigit() or int(lo) >= int(hi):
        raise argparse.ArgumentTypeError(f"{text!r} is not a slice like 20:100")
    return slice(int(lo), int(hi))


def pct(successes: int, n: int) -> str:
    lo, hi = wilson_interval(successes, n)
    return f"{100 * successes / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def pair_parser(description: str) -> argparse.ArgumentParser:
    """The arguments of a two-run comparison: the runs, the slices, the data directory."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("run_a")
    parser.add_argument("run_b")
    parser.add_argument("slices", nargs="+", type=parse_slice, metavar="LO:HI")
    parser.add_argument("--data-dir")
    return parser


def sliced_pairs(parser: argparse.ArgumentParser, args: argparse.Namespace,
                 load: Callable[[str], tuple[str, dict[str, T]]]
                 ) -> tuple[dict[str, T], dict[str, T], list[tuple[slice, list[str]]]]:
    """Both runs' records by item id (`load` gives a run's dataset and records), checked to be on
    one dataset, and for each slice the ids that both runs have, in the dataset's order."""
    dataset_a, a = load(args.run_a)
    dataset_b, b = load(args.run_b)
    if dataset_a != dataset_b:
        parser.error(f"the runs are on different datasets ({dataset_a}, {dataset_b})")
    order = [item.id for item in load_dataset(dataset_a, args.data_dir).items]
    return a, b, [(part, [i for i in order[part] if i in a and i in b]) for part in args.slices]


def main() -> None:
    parser = pair_parser(__doc__.split("\n\n")[0])
    args = parser.parse_args()
    a, b, slices = sliced_pairs(parser, args, scored)
    print(f"A = {args.run_a}\nB = {args.run_b}\n")
    print("| items | n (both scored) | A | B | A − B [95% CI] | A only / B only | McNemar p |")
    print("|---|---:|---|---|---|---|---:|")
    for part, ids in slices:
        if not ids:
            print(f"| {part.start + 1}–{part.stop} | 0 | | | | | |")
            continue
        d = paired_difference([a[i] for i in ids], [b[i] for i in ids])
        lo, hi = d["difference_ci"]
        print(f"| {part.start + 1}–{part.stop} | {len(ids)} | {pct(sum(a[i] for i in ids), len(ids))} "
              f"| {pct(sum(b[i] for i in ids), len(ids))} | {100 * d['difference']:+.1f} "
              f"[{100 * lo:+.0f}, {100 * hi:+.0f}] | {d['only_a']} / {d['only_b']} "
              f"| {d['mcnemar_p']:.2f} |")


if __name__ == "__main__":
    main()

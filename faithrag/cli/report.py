"""`faithrag report RUN_DIR... [--compare] [--common] --out DIR`: tables, plots and a JSON
summary."""

from __future__ import annotations

import argparse

from faithrag.eval.report import find_run_dirs, report


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="summarise evaluation runs (markdown, PNG plots, JSON)")
    p.add_argument("runs", nargs="+", help="run directories, or folders holding run directories")
    p.add_argument("--out", default="report", help="output directory (default ./report)")
    p.add_argument("--compare", action="store_true",
                   help="add paired differences between methods on the same dataset")
    p.add_argument("--common", action="store_true",
                   help="cut every run to the items all runs on its dataset hold")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    files = report(find_run_dirs(args.runs), args.out, compare=args.compare, seed=args.seed,
                   common=args.common)
    print(files.table.read_text())
    print(f"written: {files.table}, {files.summary}"
          + "".join(f", {p}" for p in files.plots))
    return 0

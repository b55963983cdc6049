"""`faithrag runs save RUNS --to FOLDER` / `faithrag runs restore FOLDER --to RUNS`: keep run
directories in a repository folder without the benchmark data, and bring them back to resume."""

from __future__ import annotations

import argparse

from faithrag.errors import DataError
from faithrag.eval.report import RUN_DIR_HINT
from faithrag.eval.run_bank import restore_runs, save_runs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="save run directories without the benchmark data, or "
                                    "restore them to resume")
    p.add_argument("action", choices=("save", "restore"),
                   help="save: copy runs without gold answers and options; restore: copy "
                        "saved runs back (a run there holding more records is kept)")
    p.add_argument("source", help="folder holding run directories")
    p.add_argument("--to", required=True, help="folder to copy them into")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    copy = save_runs if args.action == "save" else restore_runs
    count = copy(args.source, args.to)
    if not count:
        raise DataError(f"no run directory under {args.source}", hint=RUN_DIR_HINT)
    print(f"{args.action}d {count} run(s) from {args.source} to {args.to}")
    return 0

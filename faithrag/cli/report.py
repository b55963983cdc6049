"""`faithrag report RUN_DIR... [--compare] [--common] [--by FIELD] --out DIR`: tables, plots and
a JSON summary. `--paired RUN_A RUN_B...` prints the first run against each other run, item by
item (optionally per `--slices LO:HI` of the dataset's item order, or `--by FIELD`); `--cells
RUN...` prints every ablation cell of runs made with `csrag.ablation_grid`. Those two write no
files."""

from __future__ import annotations

import argparse

from faithrag.eval.report import cells_report, find_run_dirs, item_slice, paired_report, report


def _slice(text: str) -> slice:
    try:
        return item_slice(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="summarise evaluation runs (markdown, PNG plots, JSON)")
    p.add_argument("runs", nargs="+", help="run directories, or folders holding run directories")
    p.add_argument("--out", default="report", help="output directory (default ./report)")
    p.add_argument("--compare", action="store_true",
                   help="add paired differences between methods on the same dataset")
    p.add_argument("--common", action="store_true",
                   help="cut every run to the items all runs on its dataset hold")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--paired", action="store_true",
                      help="print the first run against each other run, paired item by item "
                           "(RUN@CELL: one ablation cell of a csrag.ablation_grid run); "
                           "writes no files")
    only.add_argument("--cells", action="store_true",
                      help="print every ablation cell of runs made with --set "
                           "csrag.ablation_grid=true against the unbiased cell; writes no files")
    p.add_argument("--slices", nargs="+", type=_slice, default=[], metavar="LO:HI",
                   help="with --paired: compare on these slices of the dataset's item order "
                        "(0:100 = the first 100 items)")
    p.add_argument("--by", metavar="FIELD",
                   help="also give accuracy per value of this field: a record field "
                        "(parse_status, extra.cfrag.decision) or item.FIELD of the dataset's item "
                        "(item.conflict_type, item.source, item.meta.KEY); with --paired, the "
                        "paired comparison per value of A's items")
    p.add_argument("--data-dir",
                   help="data root, for --slices, --by item.FIELD and re-ranking removals "
                        "(default ../shared/data or $FAITHRAG_DATA_DIR)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.slices and not args.paired:
        raise SystemExit("faithrag report: error: --slices needs --paired")
    if args.by and args.cells:
        raise SystemExit("faithrag report: error: --by does not apply to --cells")
    if args.paired:
        print(paired_report(args.runs, args.slices, args.data_dir, seed=args.seed, by=args.by),
              end="")
        return 0
    if args.cells:
        print(cells_report(find_run_dirs(args.runs), seed=args.seed), end="")
        return 0
    files = report(find_run_dirs(args.runs), args.out, compare=args.compare, seed=args.seed,
                   common=args.common, by=args.by, data_dir=args.data_dir)
    print(files.table.read_text())
    print(f"written: {files.table}, {files.summary}"
          + "".join(f", {p}" for p in files.plots))
    return 0

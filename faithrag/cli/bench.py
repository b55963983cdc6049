"""`faithrag bench --method M --dataset NAME --limit N`: where the time goes."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from faithrag.cli.common import (
    add_method_options,
    add_model_options,
    config_from_args,
)
from faithrag.cli.eval import add_data_options, run_spec, spec_from_args
from faithrag.eval.bench import breakdown, measure_rates, render_breakdown
from faithrag.eval.run_dir import ResultsFile
from faithrag.llm import load_llm


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="per-stage time, tokens and the LLM floor of a method")
    add_data_options(p)
    p.add_argument("--out", help="run directory to keep (default: a temporary one)")
    p.add_argument("--json", help="also write the breakdown to this JSON file")
    add_model_options(p)
    add_method_options(p)
    p.set_defaults(run=run, limit=20)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    spec = spec_from_args(args, config.pipeline.method)
    llm = load_llm(config.llm)
    rates = measure_rates(llm)
    with tempfile.TemporaryDirectory(prefix="faithrag-bench-") as tmp:
        out = Path(args.out or tmp)
        run_spec(spec, config, llm, args, out)
        records = ResultsFile(out / "results.jsonl").records
        result = breakdown(records, rates)
    print(render_breakdown(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0

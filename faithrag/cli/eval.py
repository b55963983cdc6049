"""`faithrag eval --dataset NAME --method M --out DIR`: a resumable evaluation run."""

from __future__ import annotations

import argparse
import json

from faithrag.cli.common import (
    add_method_options,
    add_model_options,
    build_pipeline,
    config_from_args,
    llm_from_config,
)
from faithrag.eval.runner import FREE_FORM_METRICS, EvalSpec, run_eval


def add_data_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--dataset", help="dataset name under the data directory")
    g.add_argument("--data-dir", help="data root (default ../shared/data or $FAITHRAG_DATA_DIR)")
    g.add_argument("--file", help="a single unified-JSONL file instead of --dataset")
    g.add_argument("--split", default="dev")
    g.add_argument("--limit", type=int, help="first N items")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--context", choices=["given", "retrieval"], default="given",
                   help="the item's own context, or retrieval over the whole set")
    g.add_argument("--metric", choices=FREE_FORM_METRICS, default="containment",
                   help="what counts as correct for free-form answers")
    g.add_argument("--strict", action="store_true", help="stop at the first malformed line")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a method on a dataset (resumable)")
    add_data_options(p)
    p.add_argument("--out", required=True, help="run directory (re-running resumes it)")
    p.add_argument("--workers", type=int, default=1, help="items evaluated concurrently")
    p.add_argument("--no-progress", action="store_true")
    add_model_options(p)
    add_method_options(p)
    p.set_defaults(run=run)


def spec_from_args(args: argparse.Namespace, method: str) -> EvalSpec:
    if not args.dataset and not args.file:
        raise SystemExit("faithrag eval: give --dataset NAME or --file PATH")
    return EvalSpec(
        dataset=args.dataset or "", method=method, rerank=args.rerank, verify=args.verify,
        limit=args.limit, seed=args.seed, context_mode=args.context, metric=args.metric,
        split=args.split, data_dir=args.data_dir, file=args.file,
        on_error="raise" if args.strict else "skip")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    spec = spec_from_args(args, config.pipeline.method)
    llm = llm_from_config(config)
    summary = run_eval(spec, config, args.out, llm, build_pipeline, workers=args.workers,
                       progress=not args.no_progress)
    print(json.dumps({k: summary[k] for k in ("n", "n_scored", "accuracy", "accuracy_ci",
                                              "parse_failures", "failed_items", "mean_seconds")},
                     indent=2))
    return 0

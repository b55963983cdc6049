"""`faithrag eval --dataset NAME --method M --out DIR`: a resumable evaluation run."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from faithrag.cli.common import (
    Need,
    add_method_options,
    add_model_options,
    config_from_args,
    knowledge_base_needs,
    model_needs,
    require_extras,
    retrieval_needs,
)
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.datasets import load_dataset
from faithrag.eval.executors import RayCluster
from faithrag.eval.rank_runner import RankOptions, run_rank_eval
from faithrag.eval.runner import FREE_FORM_METRICS, EvalSpec, run_eval
from faithrag.eval.suite import SUITES, read_records, run_suite
from faithrag.eval.suite_report import render_markdown, summarize
from faithrag.eval.suite_slices import SLICES
from faithrag.llm import load_llm
from faithrag.llm.base import LLM
from faithrag.pipeline import Pipeline


def add_data_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--dataset", help="dataset name under the data directory")
    g.add_argument("--data-dir", help="data root (default ../shared/data or $FAITHRAG_DATA_DIR)")
    g.add_argument("--file", help="a single unified-JSONL file instead of --dataset")
    g.add_argument("--split", default="dev")
    g.add_argument("--limit", type=int, help="first N items")
    g.add_argument("--offset", type=int, default=0,
                   help="skip this many items first (--offset 500 --limit 200: items 501 to 700)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--context", choices=["given", "retrieval", "golden", "item_retrieval"],
                   default="given",
                   help="the item's own context, retrieval over the whole set, (KRE) the "
                        "item's non-conflicting golden context and answer, or retrieval (top "
                        "-k) over the item's own passages")
    g.add_argument("--distractors", type=int, metavar="N",
                   help="inject N passages of other items that resemble the question but hold "
                        "no gold answer (given / item_retrieval; recorded as the run's sweep)")
    g.add_argument("--metric", choices=FREE_FORM_METRICS, default="containment",
                   help="what counts as correct for free-form answers")
    g.add_argument("--strict", action="store_true", help="stop at the first malformed line")
    g.add_argument("--first-stage", choices=["bm25", "given"], default="bm25",
                   help="ranking sets: order of the candidates before re-ranking")
    g.add_argument("--answer-top", type=int, metavar="K",
                   help="ranking sets: also answer each item's QA version from the top K "
                        "re-ranked passages with --method")
    g.add_argument("--answer-cache", metavar="DIR",
                   help="ranking sets with --answer-top: keep the greedy answering calls in DIR "
                        "and reuse them; runs that share DIR compute an identical answer "
                        "prompt once")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a method on a dataset (resumable)")
    add_data_options(p)
    p.add_argument("--out", required=True, help="run directory (re-running resumes it)")
    p.add_argument("--workers", type=int, default=1,
                   help="items evaluated concurrently (the embedded model is loaded this many "
                        "times, --threads each; with --ray, the number of Ray actors)")
    p.add_argument("--ray", action="store_true",
                   help="run the items on Ray actors, each loading its own model (extra "
                        "[ray]); joins $RAY_ADDRESS or starts a local cluster")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="join this Ray cluster (implies --ray), e.g. ray://head:10001")
    p.add_argument("--no-progress", action="store_true")
    g = p.add_argument_group("suite")
    g.add_argument("--suite", choices=sorted(SUITES),
                   help="the mixed suite instead of --dataset: every slice answered by plain "
                        "RAG and by the configured pipeline, paired (--limit: items per shard)")
    g.add_argument("--per-slice", type=int, default=30, metavar="N",
                   help="items sampled from each slice with --seed (default 30)")
    g.add_argument("--skip", type=int, default=0, metavar="N",
                   help="leave out the items a --per-slice N run sampled (same --seed): a "
                        "second sample, disjoint from the first")
    g.add_argument("--slices", help=f"comma-separated slices (default all: {', '.join(SLICES)})")
    g.add_argument("--shard", default="1/1", metavar="I/N",
                   help="run every N-th item from the I-th, for N processes sharing --out")
    g.add_argument("--report", action="store_true",
                   help="with --suite: only write the report of the records in --out")
    add_model_options(p)
    add_method_options(p)
    p.set_defaults(run=run)


def spec_from_args(args: argparse.Namespace, method: str) -> EvalSpec:
    if not args.dataset and not args.file:
        raise ConfigError("No evaluation data given.", "Give --dataset NAME or --file PATH.")
    return EvalSpec(
        dataset=args.dataset or "", method=method, rerank=args.rerank,
        limit=args.limit, offset=args.offset, seed=args.seed, context_mode=args.context,
        metric=args.metric, split=args.split, data_dir=args.data_dir, file=args.file,
        on_error="raise" if args.strict else "skip",
        sweep={"distractors": args.distractors} if args.distractors is not None else {})


def run_spec(spec: EvalSpec, config: Config, llm: LLM | None, args: argparse.Namespace,
             out: str | Path, workers: int = 1, progress: bool = True,
             ray: RayCluster | None = None) -> dict:
    """A QA run (run_eval) or, for a ranking set, a re-ranking run (run_rank_eval)."""
    dataset = load_dataset(spec.dataset, spec.data_dir, spec.split, spec.file, spec.on_error)
    if dataset.kind == "rank":
        options = RankOptions(first_stage=args.first_stage, answer_top=args.answer_top,
                              answer_cache=args.answer_cache)
        return run_rank_eval(spec, config, out, llm, options, workers=workers,
                             progress=progress, dataset=dataset, ray=ray)
    return run_eval(spec, config, out, llm, Pipeline.from_parts, workers=workers, progress=progress,
                    dataset=dataset, ray=ray)


def needs(args: argparse.Namespace, config: Config) -> list[Need]:
    """The extras this run needs: Ray's with --ray; the model's, unless Ray workers of a cluster
    joined by address load it in their own environment; retrieval's for a retrieval context;
    the knowledge base's."""
    on_ray = bool(args.ray or args.ray_address)
    joined = on_ray and bool(args.ray_address or os.environ.get("RAY_ADDRESS"))
    return [*([("Running on Ray (--ray)", "ray")] if on_ray else []),
            *([] if joined else model_needs(config)),
            *(retrieval_needs(config) if args.context in ("retrieval", "item_retrieval")
              else []),
            *knowledge_base_needs(config)]


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if args.suite:
        return run_suite_command(args, config)
    spec = spec_from_args(args, config.pipeline.method)
    require_extras(needs(args, config))  # before the run directory is written
    if args.ray or args.ray_address:
        ray = RayCluster(workers=args.workers, address=args.ray_address,
                         cpus_per_worker=config.llm.n_threads or 1)
        llm = None
    else:
        ray, llm = None, load_llm(config.llm, args.workers)
    summary = run_spec(spec, config, llm, args, args.out, workers=args.workers,
                       progress=not args.no_progress, ray=ray)
    if "ranking" in summary:
        figures = {name: entry["mean"] for name, entry in summary["metrics"].items()}
        print(json.dumps({"n": summary["n"], "failed_items": summary["failed_items"],
                          "accuracy": summary["accuracy"], **figures, **summary["ranking"]},
                         indent=2))
        return 0
    print(json.dumps({k: summary[k] for k in ("n", "n_scored", "accuracy", "accuracy_ci",
                                              "parse_failures", "failed_items", "mean_seconds")},
                     indent=2))
    return 0


def _shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit()):
        raise ConfigError(f"Bad --shard {text!r}", "Give --shard I/N, e.g. --shard 1/2.")
    return int(index), int(count)


def run_suite_command(args: argparse.Namespace, config: Config) -> int:
    """`--suite`: run (or resume) it, then write OUT/report.md and OUT/summary.json."""
    out = Path(args.out)
    if not args.report:
        require_extras(model_needs(config) + knowledge_base_needs(config))
        run_suite(config, out, suite=args.suite, per_slice=args.per_slice, seed=args.seed,
                  skip=args.skip, slices=args.slices.split(",") if args.slices else None,
                  data_dir=args.data_dir, shard=_shard(args.shard), limit=args.limit,
                  progress=(lambda line: None) if args.no_progress else print)
    records = read_records(out)
    if not records:
        raise ConfigError(f"No suite records in {out}", "Run without --report first.")
    summary = summarize(records)
    report = render_markdown(summary)
    (out / "report.md").write_text(report)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(report, end="")
    return 0

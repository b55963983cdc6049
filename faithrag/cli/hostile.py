"""`faithrag hostile run|report`: the hostile-retrieval settings (KRE, RAMDocs, PoisonedRAG).

A command of its own rather than `faithrag eval` options: a setting redefines what an item is
(KRE's gold becomes the golden answer, the poison's answer the attack target), builds two
indexes (the untrusted corpus and the trusted knowledge base) and injects poison, and its
report needs the setting to score drafts and targets. It reuses eval's runner, so its run
directories are ordinary resumable runs that `faithrag report` also reads.

    faithrag hostile run --setting kre_musique --retrieval hostile --verify antisyco \\
        --limit 100 --threads 1 --out runs/hostile/kre_musique-hostile-antisyco
    faithrag hostile report runs/hostile --out runs/hostile/report.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from faithrag.cli.common import (
    add_method_options,
    add_model_options,
    config_from_args,
    model_needs,
    require_extras,
    retrieval_needs,
)
from faithrag.eval.adaptive_poison import ATTACKS, MODEL_ATTACKS, adapt, attack_model
from faithrag.eval.hostile_runner import RETRIEVALS, render_markdown, run_hostile, summarize_dirs
from faithrag.eval.hostile_settings import SETTINGS, build_setting
from faithrag.llm import load_llm
from faithrag.pipeline import Pipeline


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hostile", help="clean vs hostile retrieval on KRE, RAMDocs, PoisonedRAG")
    actions = p.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="run (or resume) one setting x retrieval x pipeline")
    run.add_argument("--setting", required=True, choices=SETTINGS)
    run.add_argument("--retrieval", required=True, choices=RETRIEVALS)
    run.add_argument("--out", required=True, help="run directory (re-running resumes it)")
    run.add_argument("--data-dir", help="data root (default ../shared/data or $FAITHRAG_DATA_DIR)")
    run.add_argument("--limit", type=int, help="first N items")
    run.add_argument("--offset", type=int, default=0,
                     help="skip this many items first (--offset 100 --limit 100: items 101 to 200)")
    run.add_argument("--poison-count", type=int,
                     help="poisoned passages injected per question (default: all it has)")
    run.add_argument("--poison-positions", type=int, nargs="+",
                     help="ranks the poisoned passages take, 0 = top (default: the top ranks)")
    run.add_argument("--attack", choices=ATTACKS, default="standard",
                     help="rewrite the poison as an attacker who adapts to a poisoning filter "
                          "would (faithrag/eval/adaptive_poison.py; `paraphrased` rewrites it "
                          "with the run's model, kept under $FAITHRAG_CACHE/attacks)")
    run.add_argument("--workers", type=int, default=1,
                     help="items evaluated concurrently (the embedded model is loaded this many "
                          "times, --threads each)")
    run.add_argument("--no-progress", action="store_true")
    add_model_options(run)
    add_method_options(run)
    run.set_defaults(run=_run)
    rep = actions.add_parser("report", help="tables over hostile run directories")
    rep.add_argument("runs", nargs="+", help="run directories, or folders holding them")
    rep.add_argument("--data-dir", help="data root the runs were made from")
    rep.add_argument("--out", help="write the markdown here (default: print it)")
    rep.add_argument("--json", help="also write the figures to this JSON file")
    rep.set_defaults(run=_report)


def _run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    # before the run directory: the model, and the corpus and knowledge-base indexes it builds
    require_extras([*model_needs(config), *retrieval_needs(config)])
    setting = build_setting(args.setting, args.data_dir)
    llm = load_llm(config.llm, args.workers)
    setting = adapt(setting, args.attack,
                    attack_model(llm, config) if args.attack in MODEL_ATTACKS else None)
    summary = run_hostile(setting, args.retrieval, config, args.out, llm, Pipeline.from_parts,
                          limit=args.limit, offset=args.offset, k=args.k,
                          poison_count=args.poison_count, positions=args.poison_positions,
                          workers=args.workers,
                          progress=not args.no_progress)
    print(json.dumps(summary, indent=2))
    return 0


def _report(args: argparse.Namespace) -> int:
    summaries = summarize_dirs(args.runs, args.data_dir)
    table = render_markdown(summaries)
    if args.out:
        Path(args.out).write_text(table, encoding="utf-8")
    else:
        print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=2))
    return 0

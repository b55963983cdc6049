"""`faithrag ask "QUESTION" (--index IDX | --docs PATH)`: answer one question."""

from __future__ import annotations

import argparse
import json

from faithrag.cli.common import add_method_options, add_model_options, config_from_args
from faithrag.explain import render_answer, render_conflicts, render_explanation
from faithrag.pipeline import Pipeline, make_question


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="answer a question from an index or a folder of documents")
    p.add_argument("question")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--index", help="index built by `faithrag index`: a directory or lancedb:URI")
    src.add_argument("--docs", help="file or folder of documents (txt, md, jsonl), indexed in memory")
    p.add_argument("--choices", nargs="+", help="answer options (multiple choice)")
    p.add_argument("--explain", action="store_true", help="show evidence, stages and decisions")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    add_model_options(p)
    add_method_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    question = make_question(args.question, args.choices)
    config = config_from_args(args)
    if args.explain:  # CSRAG: also show the options' probabilities with and without the bias
        config.csrag.probe_choices = True
    pipeline = Pipeline.from_config(config, index=args.index, docs=args.docs)
    result = pipeline.run(question)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2, default=str))
    elif args.explain:
        print(render_explanation(result))
    else:
        print(render_answer(result))
        conflicts = render_conflicts(result)
        if conflicts:
            print(conflicts)
    return 0

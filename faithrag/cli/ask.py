"""`faithrag ask "QUESTION" (--index IDX | --docs PATH)`: answer one question. Without evidence
the command refuses, unless the method is `closed_book` (the model's memory alone, on purpose)."""

from __future__ import annotations

import argparse
import json

from faithrag.cli.common import add_method_options, add_model_options, config_from_args
from faithrag.errors import ConfigError
from faithrag.explain import render_answer, render_conflicts, render_explanation
from faithrag.pipeline import Pipeline, make_question

MEMORY_METHOD = "closed_book"  # the one method meant to answer without evidence


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
    if args.index is None and args.docs is None and config.pipeline.method != MEMORY_METHOD:
        raise ConfigError("No evidence was given: neither --docs nor --index.",
                          "Pass --docs PATH or --index DIR; to answer from the model's memory "
                          f"alone, pass --method {MEMORY_METHOD}.")
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

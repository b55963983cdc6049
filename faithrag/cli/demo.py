"""`faithrag demo`: what faithrag does that plain RAG does not, on a small built-in corpus.

One question per conflict kind (faithrag/data/demo/cases.toml): the evidence retrieved, plain
RAG's answer (the generator alone, `--plain`), and the default pipeline's answer with its
conflict report; where a kind calls for a stage the defaults leave out (a trusted knowledge
base against poisoned retrieval), that pipeline too. Each answer is marked right (every
expected reading, no other one), "shown" (right, with the other reading given beside it as one
reading of a surfaced conflict, its sources named) or wrong; plain RAG's line says which reading
of the evidence it kept quiet about. A progress line comes before each case. `--all-methods`
answers every case with every method instead (each method alone, as plain RAG with that stage)
and scores each; `--explain` adds every stage's decisions."""

from __future__ import annotations

import argparse
import sys
import time
from importlib.resources import files
from typing import Any

from faithrag.answers import containment
from faithrag.cli.common import add_model_options, config_from_args
from faithrag.config import Config, tomllib
from faithrag.explain import render_explanation, render_side
from faithrag.llm import load_llm
from faithrag.pipeline import Pipeline, Result, configure
from faithrag.registry import PLAIN_RAG
from faithrag.types import Question

# --all-methods: (label, config overrides over plain RAG). Later methods add their rows here.
DEMO_RUNS: list[tuple[str, dict[str, str | None]]] = [
    ("closed book", {"pipeline.method": "closed_book"}),
    ("vanilla RAG", {"pipeline.method": "vanilla"}),
    # the same answer, and the conflicts plain RAG met without saying so
    ("vanilla + detect conflicts", {"pipeline.method": "vanilla",
                                    "pipeline.detect": "conflicts"}),
    # crossval with the paper's pairwise verdict and with the votes a small model can cast
    ("vanilla + crossval, pairwise", {"pipeline.method": "vanilla", "pipeline.rerank": "crossval",
                                      "rerank.verdict": "pairwise"}),
    ("vanilla + crossval, support", {"pipeline.method": "vanilla", "pipeline.rerank": "crossval",
                                     "rerank.verdict": "support"}),
    ("CSRAG", {"pipeline.method": "csrag"}),
    ("CF-RAG", {"pipeline.method": "cfrag"}),
    ("vanilla + anti-sycophancy", {"pipeline.method": "vanilla", "pipeline.verify": "antisyco"}),
]
LABEL_WIDTH = 28


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="plain RAG against faithrag's defaults, one case per "
                       "conflict kind, on a built-in corpus")
    p.add_argument("--all-methods", action="store_true",
                   help="answer every case with every method, each alone, and score them")
    p.add_argument("--explain", action="store_true", help="show every stage's decisions")
    p.add_argument("--case", type=int, action="append",
                   help="run only these cases (1-based, repeatable)")
    p.add_argument("--scenarios", action="store_true",
                   help="also run the anti-sycophancy scenario suite (faithrag/data/scenarios)")
    add_model_options(p)
    p.set_defaults(run=run)


def verdict(case: dict[str, Any], result: Result) -> str:
    """✓ every expected reading and no other; "shown" the same with another reading given as
    one reading of a surfaced conflict; ✗ otherwise."""
    text = result.answer.text
    right = all(containment(text, [e]) for e in case["expected"])
    others = [o for o in case["other"] if containment(text, [o])]
    if right and not others:
        return "✓"
    if right and result.answer.meta.get("readings_listed"):
        return "shown"
    return "✗"


def _silent(case: dict[str, Any], result: Result, evidence: str) -> str:
    """The readings the evidence holds that the answer does not mention."""
    unsaid = [r for r in case["expected"] + case["other"]
              if containment(evidence, [r]) and not containment(result.answer.text, [r])]
    return f"  (silent: the evidence also says {', '.join(unsaid)})" if unsaid else ""


def _print_result(label: str, case: dict[str, Any], result: Result, seconds: float,
                  note: str = "", explain: bool = False) -> None:
    print(f"  {label:{LABEL_WIDTH}} {verdict(case, result)} {result.answer.text}{note}"
          f"  ({seconds:.1f}s)")
    pad = " " * (LABEL_WIDTH + 4)
    for removed in result.removed:  # what a re-ranker dropped, and why
        print(f"{pad}removed [{removed.passage.source.rsplit('/', 1)[-1]}]: {removed.reason}")
    for conflict in result.conflicts:
        sides = " | ".join(render_side(side) for side in conflict.sides)
        print(f"{pad}{conflict.kind} ({conflict.action}): {sides}")
    if "decision" in result.answer.meta:  # a verifier's verdict on the draft
        print(f"{pad}{result.answer.meta['decision']}: {'; '.join(result.answer.meta['reasons'])}")
    if explain:
        print("\n" + "\n".join("    " + line
                               for line in render_explanation(result).splitlines()) + "\n")


def _timed(pipeline: Pipeline, question: Question) -> tuple[Result, float]:
    started = time.perf_counter()
    result = pipeline.run(question)
    return result, time.perf_counter() - started


def _ways(base: Config, case: dict[str, Any], trusted: str) -> list[tuple[str, Config]]:
    ways = [("plain RAG (--plain)", configure(base, plain=True)),
            ("faithrag, the defaults", base)]
    if case.get("add") == "kb":
        ways.append(("faithrag + --kb trusted/", configure(base, {
            "pipeline.verify": "antisyco", "antisyco.kb": base.antisyco.kb or trusted})))
    return ways


def run(args: argparse.Namespace) -> int:
    from faithrag.retrieval import ChunkSettings, InMemoryRetriever
    from faithrag.retrieval.corpus import read_passages

    demo = files("faithrag") / "data" / "demo"
    cases = tomllib.loads((demo / "cases.toml").read_text(encoding="utf-8"))["case"]
    base = config_from_args(args)
    trusted = str(demo / "trusted")  # a curated folder the verifier trusts
    passages = read_passages(str(demo / "corpus"), ChunkSettings(base.retrieval.chunk_tokens,
                                                                 base.retrieval.chunk_overlap))
    retriever = InMemoryRetriever(passages, mode=base.retrieval.mode)
    llm = load_llm(base.llm)
    print(f"faithrag demo: {len(passages)} passages, model {llm.name}\n")
    chosen = [(n, c) for n, c in enumerate(cases, 1) if (n in args.case if args.case else (
        args.all_methods or not c.get("all_methods")))]
    score: dict[str, list[int]] = {}  # label -> [right or shown, cases run]
    for position, (number, case) in enumerate(chosen, 1):
        question = Question(case["question"])
        print(f"[{position}/{len(chosen)}] case {number}, {case['kind']}: {case['question']}",
              flush=True)
        print(f"  a faithful answer: {' and '.join(case['expected'])}")
        evidence = retriever.retrieve(question.text, base.retrieval.k)
        print("  evidence:")
        for p in evidence:
            print(f"    - [{p.source.rsplit('/', 1)[-1]}] {' '.join(p.text.split())[:100]}…")
        runs = ([(label, configure(base, {**PLAIN_RAG, "antisyco.kb": base.antisyco.kb
                                          or trusted, **overrides}))
                 for label, overrides in DEMO_RUNS] if args.all_methods
                else _ways(base, case, trusted))
        text = " ".join(p.text for p in evidence)
        for label, config in runs:
            result, seconds = _timed(Pipeline.from_config(config, llm=llm, retriever=retriever),
                                     question)
            mark = verdict(case, result)
            tally = score.setdefault(label, [0, 0])
            tally[0], tally[1] = tally[0] + (mark != "✗"), tally[1] + 1
            note = _silent(case, result, text) if config.pipeline.detect is None else ""
            _print_result(label, case, result, seconds, note, args.explain)
        print()
    print("Right or shown with sources: " + ", ".join(f"{label} {k}/{n}"
                                                     for label, (k, n) in score.items()))
    if args.scenarios:
        _scenarios(llm, base, args.explain)
    sys.stdout.flush()
    return 0


def _scenarios(llm, config, explain: bool) -> None:
    from faithrag.eval.scenarios import load_scenarios, render_outcome, run_scenario

    scenarios = load_scenarios()
    print("\n=== Anti-sycophancy scenarios: vanilla draft, antisyco verifier, own corpora and "
          "trusted KB ===")
    passed = 0
    for scenario in scenarios:
        outcome = run_scenario(scenario, llm, config)
        passed += outcome.ok
        print("  " + render_outcome(outcome))
        if explain:
            print("\n" + "\n".join("    " + line for line in
                                   render_explanation(outcome.result).splitlines()) + "\n")
    print(f"Scenarios: {passed}/{len(scenarios)}")

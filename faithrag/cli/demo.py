"""`faithrag demo`: one case per conflict kind on a small built-in corpus, answered by every
method that applies, with the evidence, the conflicts each answer met (one line per conflict,
its sides and their sources) and (with --explain) each stage's decisions."""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files

from faithrag.answers import containment
from faithrag.cli.common import add_model_options, config_from_args
from faithrag.config import tomllib
from faithrag.explain import render_explanation, render_side
from faithrag.llm import load_llm
from faithrag.pipeline import Pipeline, configure
from faithrag.types import Question

# (label, config overrides). Later methods add their rows here.
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


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the four conflict kinds on a built-in corpus")
    p.add_argument("--explain", action="store_true", help="show every stage of every method")
    p.add_argument("--case", type=int, action="append",
                   help="run only these cases (1-based, repeatable)")
    p.add_argument("--scenarios", action="store_true",
                   help="also run the anti-sycophancy scenario suite (faithrag/data/scenarios)")
    add_model_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from faithrag.retrieval import ChunkSettings, InMemoryRetriever
    from faithrag.retrieval.corpus import read_passages

    demo = files("faithrag") / "data" / "demo"
    cases = tomllib.loads((demo / "cases.toml").read_text(encoding="utf-8"))["case"]
    base = config_from_args(args)
    if not base.antisyco.kb:  # what the anti-sycophancy verifier trusts: a curated folder
        base.antisyco.kb = str(demo / "trusted")
    passages = read_passages(str(demo / "corpus"), ChunkSettings(base.retrieval.chunk_tokens,
                                                                 base.retrieval.chunk_overlap))
    retriever = InMemoryRetriever(passages, mode=base.retrieval.mode)
    llm = load_llm(base.llm)
    print(f"faithrag demo: {len(passages)} passages, model {llm.name}\n")
    wanted = set(args.case or range(1, len(cases) + 1))
    score: dict[str, int] = {label: 0 for label, _ in DEMO_RUNS}
    for number, case in enumerate(cases, 1):
        if number not in wanted:
            continue
        question = Question(case["question"])
        print(f"=== Case {number}: {case['kind']} ===")
        print(f"Question: {case['question']}\nExpected: {case['expected']}")
        evidence = retriever.retrieve(question.text, base.retrieval.k)
        print("Evidence:")
        for p in evidence:
            snippet = " ".join(p.text.split())
            print(f"  - [{p.source.rsplit('/', 1)[-1]}] {snippet[:110]}…")
        for label, overrides in DEMO_RUNS:
            config = configure(base, overrides)
            result = Pipeline.from_config(config, llm=llm, retriever=retriever).run(question)
            ok = containment(result.answer.text, [case["expected"]])
            score[label] += ok
            print(f"  {label:28} {'✓' if ok else '✗'} {result.answer.text}"
                  f"  ({result.trace.totals()['seconds']:.1f}s)")
            for removed in result.removed:  # what a re-ranker dropped, and why
                print(f"  {'':28}   removed [{removed.passage.source.rsplit('/', 1)[-1]}]: "
                      f"{removed.reason}")
            for conflict in result.conflicts:
                sides = " | ".join(render_side(side) for side in conflict.sides)
                print(f"  {'':28}   {conflict.kind} ({conflict.action}): {sides}")
            if "decision" in result.answer.meta:  # a verifier's verdict on the draft
                print(f"  {'':28}   {result.answer.meta['decision']}: "
                      f"{'; '.join(result.answer.meta['reasons'])}")
            if args.explain:
                print("\n" + "\n".join("    " + line
                                       for line in render_explanation(result).splitlines()) + "\n")
        print()
    n = len(wanted)
    print("Summary: " + ", ".join(f"{label} {s}/{n}" for label, s in score.items()))
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

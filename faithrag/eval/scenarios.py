"""The anti-sycophancy scenario suite: four small hand-written cases in faithrag/data/scenarios
(a clean factual query, a poisoned non-canonical version of a fact, a same-name different-entity
trap, a clean science query). Each case has its own small corpus, the untrusted retrieval; all
share the trusted knowledge base in `trusted/`. `cases.toml` says, per case, the right answer and
the decisions a working verifier may make. Run by the model test of the verifier and by
`faithrag demo --scenarios`."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from faithrag.answers import containment
from faithrag.config import Config, tomllib
from faithrag.llm.base import LLM
from faithrag.pipeline import Pipeline, Result
from faithrag.retrieval.chunking import chunk_documents
from faithrag.retrieval.loaders import load_documents
from faithrag.retrieval.retriever import InMemoryRetriever


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str
    question: str
    corpus: Path
    expected: str
    decisions: tuple[str, ...]  # what a working verifier may decide
    poison: str = ""  # the answer the untrusted corpus pushes, if any


@dataclass
class ScenarioOutcome:
    scenario: Scenario
    result: Result

    @property
    def decision(self) -> str:
        return self.result.answer.meta.get("decision", "")

    @property
    def draft(self) -> str:
        return self.result.answer.meta.get("draft", "")

    @property
    def answer_ok(self) -> bool:
        return containment(self.result.answer.text, [self.scenario.expected])

    @property
    def ok(self) -> bool:
        return self.answer_ok and self.decision in self.scenario.decisions


def scenarios_dir() -> Path:
    return Path(str(files("faithrag") / "data" / "scenarios"))


def trusted_kb_dir() -> Path:
    return scenarios_dir() / "trusted"


def render_outcome(outcome: ScenarioOutcome) -> str:
    s = outcome.scenario
    return (f"{s.kind}: {'✓' if outcome.ok else '✗'} draft {outcome.draft!r} -> "
            f"{outcome.decision} -> {outcome.result.answer.text!r} (expected {s.expected!r}, "
            f"decision {' or '.join(s.decisions)}; "
            f"{outcome.result.trace.totals()['seconds']:.0f}s)")


def load_scenarios() -> list[Scenario]:
    root = scenarios_dir()
    cases = tomllib.loads((root / "cases.toml").read_text(encoding="utf-8"))["case"]
    return [Scenario(c["name"], c["kind"], c["question"], root / c["corpus"], c["expected"],
                     tuple(c["decisions"]), c.get("poison", "")) for c in cases]


def run_scenario(scenario: Scenario, llm: LLM, config: Config,
                 kb: str | None = None) -> ScenarioOutcome:
    """Answer the scenario with config's generator and the antisyco verifier (config's
    antisyco settings), trusting `kb` (default: the suite's trusted folder)."""
    documents = load_documents(scenario.corpus).documents
    retriever = InMemoryRetriever(chunk_documents(documents, config.retrieval.chunk_tokens,
                                                  config.retrieval.chunk_overlap),
                                  mode=config.retrieval.mode)
    pipeline = Pipeline.from_config(config, llm=llm, retriever=retriever, plain=True,
                                    verify="antisyco", kb=kb or trusted_kb_dir())
    return ScenarioOutcome(scenario, pipeline.run(scenario.question))

"""Plain data passed between stages: passages, questions, answers and the trace."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Passage:
    """A piece of evidence. `source` names where it came from, so trust can be configured."""

    id: str
    text: str
    title: str = ""
    source: str = ""
    score: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def with_score(self, score: float) -> Passage:
        return Passage(self.id, self.text, self.title, self.source, score, dict(self.meta))


@dataclass
class Question:
    text: str
    id: str = ""
    choices: list[str] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


PARSE_OK = "ok"
PARSE_FAILED = "failed"


@dataclass
class Answer:
    """A method's final answer. `parse_status` is PARSE_FAILED when the model output could not be
    read; `text` then holds the raw output and `choice_index` stays None."""

    text: str
    choice_index: int | None = None
    reason: str = ""
    parse_status: str = PARSE_OK
    raw: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class LLMCallRecord:
    purpose: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False


@dataclass
class Step:
    """One stage's record: what it saw, what it produced and decided, its LLM calls and time."""

    stage: str
    name: str
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    decision: str = ""
    llm_calls: list[LLMCallRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # the passages the step's prompt held, when it framed any: {"seen": [ids in order],
    # "cut": {id: the text kept of a passage cut to fit}}
    evidence: dict[str, Any] = field(default_factory=dict)

    def record_llm(self, purpose: str, prompt_tokens: int, completion_tokens: int,
                   seconds: float, cached: bool = False) -> None:
        self.llm_calls.append(
            LLMCallRecord(purpose, prompt_tokens, completion_tokens, seconds, cached))

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.llm_calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.llm_calls)

    @property
    def llm_seconds(self) -> float:
        return sum(c.seconds for c in self.llm_calls)


@dataclass
class Trace:
    steps: list[Step] = field(default_factory=list)

    @contextmanager
    def step(self, stage: str, name: str, **inputs: Any) -> Iterator[Step]:
        """Open a step; its wall time is measured and it is appended even if the stage fails."""
        step = Step(stage=stage, name=name, inputs=dict(inputs))
        start = time.perf_counter()
        try:
            yield step
        finally:
            step.seconds = time.perf_counter() - start
            self.steps.append(step)

    @property
    def warnings(self) -> list[str]:
        return [w for s in self.steps for w in s.warnings]

    def totals(self) -> dict[str, float]:
        return {
            "llm_calls": sum(len(s.llm_calls) for s in self.steps),
            "prompt_tokens": sum(s.prompt_tokens for s in self.steps),
            "completion_tokens": sum(s.completion_tokens for s in self.steps),
            "llm_seconds": sum(s.llm_seconds for s in self.steps),
            "seconds": sum(s.seconds for s in self.steps),
        }

    def summary(self) -> dict[str, Any]:
        """Compact per-stage figures, for result files and benchmarks."""
        return {
            "stages": [
                {"stage": s.stage, "name": s.name, "decision": s.decision,
                 "seconds": round(s.seconds, 4), "llm_calls": len(s.llm_calls),
                 "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
                 "llm_seconds": round(s.llm_seconds, 4)}
                for s in self.steps
            ],
            **self.totals(),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [asdict(s) for s in self.steps], "totals": self.totals()}

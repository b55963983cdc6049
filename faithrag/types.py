"""Plain data passed between stages: passages, questions, answers and the trace."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


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


ConflictKind = Literal["context_vs_memory", "passage_vs_passage", "ambiguous",
                       "contradicted_by_trusted_kb", "low_relevance", "poisoning_suspected"]
CONFLICT_KINDS: tuple[str, ...] = ConflictKind.__args__
# The kinds the pipeline's `on_conflict` policy acts on (all but "resolve"); the others are
# reported only (see faithrag.methods.conflicts).
POLICY_KINDS: tuple[str, ...] = ("passage_vs_passage", "ambiguous", "contradicted_by_trusted_kb")
# What the pipeline did about a conflict: `reported` = found and left alone (detect-only).
ConflictAction = Literal["kept", "removed", "repaired", "fell_back", "surfaced", "flagged",
                         "abstained", "reported"]
CheckStatus = Literal["conflict", "no_conflict", "could_not_tell"]


@dataclass
class ConflictSide:
    """One side of a conflict, never invented: `quote` is the text it came from (a passage, a
    knowledge-base claim, or the model's own closed-book statement when `source` is
    "memory"), `passages` the ids of the passages or claims behind it, `answer` that side's
    answer to the question as the model read it."""

    answer: str
    quote: str
    passages: list[str] = field(default_factory=list)
    source: str = ""


@dataclass
class Conflict:
    """A disagreement a stage met: its kind, the sides, how sure the stage is (0-1, None when
    it does not say), and what the pipeline did about it."""

    kind: ConflictKind
    stage: str
    sides: list[ConflictSide]
    action: ConflictAction
    confidence: float | None = None
    note: str = ""


@dataclass
class ConflictCheck:
    """That a detector looked for one kind of conflict, and what it could tell: a reply it could
    not read is `could_not_tell`, never `no_conflict`."""

    kind: ConflictKind
    stage: str
    status: CheckStatus
    note: str = ""  # what the check set aside, e.g. the passages it judged off-subject


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
    # the passages the step's prompts held, when they framed any (faithrag.methods.common.fit):
    # {"seen": [ids in order], "cut": {id: the text kept of a passage cut to fit}, "reason":
    # why a passage it was handed may be missing or cut}
    evidence: dict[str, Any] = field(default_factory=dict)
    # the conflicts this step met, and the checks it made (including those that found none)
    conflicts: list[Conflict] = field(default_factory=list)
    checks: list[ConflictCheck] = field(default_factory=list)

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
class EvidenceView:
    """What the generator saw of the `given` passages it was handed: `seen` are the ones its
    prompts held, in the given order, a passage cut to fit with the text that was kept (its id
    in `cut`); `dropped` the ids of the others; `reason` why some were dropped or cut ("" when
    none was)."""

    given: int
    seen: list[Passage]
    cut: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    reason: str = ""

    def summary(self) -> dict[str, Any]:
        """{"given", "seen", "dropped": counts, "cut": ids, "reason"}."""
        return {"given": self.given, "seen": len(self.seen), "dropped": len(self.dropped),
                "cut": list(self.cut), "reason": self.reason}


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
    def conflicts(self) -> list[Conflict]:
        return [c for s in self.steps for c in s.conflicts]

    @property
    def checks(self) -> list[ConflictCheck]:
        return [c for s in self.steps for c in s.checks]

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

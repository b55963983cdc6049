"""The anti-sycophancy verifier's records of a reflection and of a claim checked against the
trusted knowledge base, and the helpers that read them (faithrag.methods.antisyco)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from faithrag.answers import (
    normalize_answer,
    same_answer,
)
from faithrag.methods.antisyco.prompts import CANNOT_TELL
from faithrag.methods.plain_answer import (
    read_answer,
)
from faithrag.types import (
    PARSE_OK,
    Answer,
    Passage,
    Question,
    Step,
)


@dataclass
class Reflection:
    relevance_label: str | None
    relevance: float | None
    support: str | None
    raw: list[str] = field(default_factory=list)
    not_asked: tuple[str, ...] = ()  # "relevance", "support": not needed by the decision
    why_not_asked: str = ""


@dataclass
class ClaimCheck:
    claim: str
    evidence: list[Passage]  # the anti-context, from the trusted knowledge base
    verdict: str | None = None  # a VERDICT_LABELS label, or CANNOT_TELL (qa mode)
    score: float | None = None  # contradiction in [0, 1]; None when unreadable, unchecked or
    # CANNOT_TELL
    reference: str | None = None  # qa mode: the answer the anti-context gives
    raw: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "verdict": self.verdict, "score": self.score,
                "reference": self.reference, "evidence": [p.id for p in self.evidence]}


# a second sentence: end punctuation followed by more text
_SENTENCE_BREAK = re.compile(r"[.!?;]\s+\S")


def agreed_reference(references: list[str | None]) -> str | None:
    """The reference answer all of `references` give (the first, when every other is the same
    answer); None when there is none, one is missing (judge mode) or they disagree."""
    if not references or not references[0]:
        return None
    first = references[0]
    return first if all(r and same_answer(first, r) for r in references[1:]) else None


def every_claim_consistent(checks: list[ClaimCheck]) -> bool:
    """Whether there are claims and the trusted knowledge base found each CONSISTENT."""
    return bool(checks) and all(c.verdict == "CONSISTENT" for c in checks)


def reference_repair(question: Question, contradicted: list[ClaimCheck]) -> Answer | None:
    """The reference answer (qa mode) that every contradicted claim's trusted passages gave
    (`agreed_reference`); None when there is none or it names no option of a multiple-choice
    question."""
    reference = agreed_reference([c.reference for c in contradicted])
    if reference is None:
        return None
    answer = read_answer(reference, question)
    return answer if answer.parse_status == PARSE_OK else None


def is_short(text: str, max_words: int) -> bool:
    """At most `max_words` words and no second sentence: an answer that is one fact."""
    return len(text.split()) <= max_words and not _SENTENCE_BREAK.search(text.strip())


def whole_draft_claim(question: Question, draft: Answer) -> str:
    return f'The answer to "{question.text.strip()}" is {draft.text.strip()}.'


def count_unreadable(step: Step, unreadable: list[str], what: str,
                default: str = "it does not count towards an intervention") -> None:
    unreadable.append(what)
    step.warnings.append(f"unreadable {what}: counted; {default}")


def grounded(answer: str, evidence: list[Passage]) -> bool:
    """At least half of the answer's words occur in the evidence (SQuAD normalisation)."""
    words = normalize_answer(answer).split()
    found = set(normalize_answer(" ".join(p.text for p in evidence)).split())
    return bool(words) and sum(w in found for w in words) >= len(words) / 2


def contradiction_summary(checks: list[ClaimCheck], threshold: float) -> str:
    """Why no claim triggered REPAIR: the highest score, and the claims without one."""
    scores = [c.score for c in checks if c.score is not None]
    unchecked = sum(not c.evidence for c in checks)
    undecided = sum(c.verdict == CANNOT_TELL for c in checks)
    unread = len(checks) - len(scores) - unchecked - undecided
    why = [f"{n} of {len(checks)} {what}" for n, what in (
        (unchecked, "without a trusted passage"),
        (undecided, "cannot tell (the trusted answer neither agrees nor disagrees)"),
        (unread, "unreadable")) if n]
    head = (f"no claim contradicted (max {max(scores):.2f} < {threshold})" if scores
            else "no claim scored")
    return head + (f" ({', '.join(why)})" if why else "")


def format_score(value: float | None) -> str:
    return "unreadable" if value is None else f"{value:.2f}"



"""Readers for CF-RAG's model outputs: the counterfactual list, a hypothesis and an answer line.

Counterfactual list, one line per variant (numbering, bullets and markdown bold tolerated):

    ORIGINAL => <short answer to the question>
    role: <counterfactual question> => <its short answer>
    temporal: ...

The type must be one of the five transformation types; the answer part (after "=>", "->" or
"→") may be missing or "unknown". Any other non-empty line is counted as unparsable.

Hypothesis (the rationale may come before or after the answer):

    Rationale: <one sentence>
    Answer: <short answer>

The "Answer:" label is required (an answer on the line after a bare label is accepted; the
first label counts); a missing rationale leaves it empty. Output without an answer is
unparsable — the caller counts it and never guesses an answer from it.

Answer line (a draft when the rationale is extracted rather than written): the first non-empty
line, minus an "Answer:" label; output without one is unparsable."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TYPES = ("role", "temporal", "entity", "categorical", "scope")
UNKNOWN_ANSWERS = frozenset({"", "unknown", "not known", "n/a", "na", "none", "?", "not sure",
                             "unsure", "i don't know", "i do not know", "no answer"})

_DECORATION = re.compile(r"^\s*(?:[-*•]\s*|\d+\s*[.)]\s*)?")
_ANSWER_SEP = re.compile(r"\s*(?:=>|->|→)\s*")
_ORIGINAL = re.compile(r"^original(?:\s+(?:question|answer))?\s*(?:=>|->|→|:)\s*(.*)$",
                       re.IGNORECASE)
_TYPED = re.compile(r"^\[?(" + "|".join(TYPES) + r")(?![a-z])\]?\s*(?:[:.)\]-]|=>)?\s*(.*)$",
                    re.IGNORECASE)
_ANSWER_LABEL = re.compile(r"^\s*(?:final\s+)?answer\s*[:：]\s*(.*)$", re.IGNORECASE)
_RATIONALE_LABEL = re.compile(r"^\s*(?:rationale|reason(?:ing)?|explanation|because)\s*[:：]\s*",
                              re.IGNORECASE)
_INLINE_RATIONALE = re.compile(r"\s*(?:rationale|reason(?:ing)?|because)\s*[:：]\s*",
                               re.IGNORECASE)


@dataclass(frozen=True)
class CounterfactualCandidate:
    type: str
    question: str
    answer: str | None  # None when the model gave none or said it does not know


@dataclass
class CounterfactualList:
    original_answer: str | None
    candidates: list[CounterfactualCandidate] = field(default_factory=list)
    unparsable_lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ParsedHypothesis:
    answer: str | None  # None: unparsable
    rationale: str

    @property
    def abstained(self) -> bool:
        """The model answered that it does not know."""
        return self.answer is not None and self.answer.lower() in UNKNOWN_ANSWERS


def _clean(text: str) -> str:
    text = text.replace("**", "").replace("__", "").strip()
    return text.strip(" \t\"'`").strip()


def _answer_or_none(text: str) -> str | None:
    answer = _clean(text).rstrip(".").strip()
    return None if answer.lower() in UNKNOWN_ANSWERS else answer


def parse_counterfactuals(text: str) -> CounterfactualList:
    result = CounterfactualList(original_answer=None)
    for raw in text.splitlines():
        line = _clean(_DECORATION.sub("", _clean(raw), count=1))
        if not line:
            continue
        original = _ORIGINAL.match(line)
        if original:
            if result.original_answer is None:
                result.original_answer = _answer_or_none(original.group(1))
            continue
        typed = _TYPED.match(line)
        body = typed.group(2).strip() if typed else ""
        parts = _ANSWER_SEP.split(body, maxsplit=1)
        question = _clean(parts[0])
        if not typed or len(question) < 3:
            result.unparsable_lines.append(raw.strip())
            continue
        answer = _answer_or_none(parts[1]) if len(parts) > 1 else None
        result.candidates.append(
            CounterfactualCandidate(typed.group(1).lower(), question, answer))
    return result


def parse_hypothesis(text: str) -> ParsedHypothesis:
    lines = [line.replace("**", "").replace("__", "") for line in text.splitlines()]
    answer: str | None = None
    rationale_lines: list[str] = []
    section = ""  # "rationale" while unlabelled lines continue the rationale
    for i, line in enumerate(lines):
        label = _ANSWER_LABEL.match(line)
        if label is not None and answer is None:
            value = label.group(1).strip()
            if not value:  # "Answer:" alone: the answer is on the next non-empty line
                following = next((x.strip() for x in lines[i + 1:] if x.strip()), "")
                if not (_RATIONALE_LABEL.match(following) or _ANSWER_LABEL.match(following)):
                    value = following
            inline = _INLINE_RATIONALE.search(value)
            if inline:  # "Answer: X. Rationale: ..." on one line
                rationale_lines.append(value[inline.end():])
                value = value[:inline.start()]
            section = "rationale" if inline else "answer"
            answer = _clean(value).rstrip(".").strip() or None
            if answer is None:
                answer = ""  # a label with nothing usable: unparsable, see below
            continue
        rationale = _RATIONALE_LABEL.match(line)
        if rationale:
            section = "rationale"
            rationale_lines.append(line[rationale.end():])
        elif section == "rationale" and label is None:
            rationale_lines.append(line)
    return ParsedHypothesis(answer or None, " ".join(" ".join(rationale_lines).split()))


def parse_answer_line(text: str) -> str | None:
    line = next((x for x in text.splitlines() if x.strip()), "")
    label = _ANSWER_LABEL.match(line.replace("**", "").replace("__", ""))
    return _clean(label.group(1) if label else line).rstrip(".").strip() or None

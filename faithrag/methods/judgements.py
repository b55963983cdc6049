"""Reading an LLM judge's reply: a label from a fixed set, a score in [0, 1], a list of claims.

Small models add prose and markdown, change case, or write "Score: 85%". The readers accept
that, but never guess: a reply without a readable value gives None (or no claims), and the
caller counts it and applies its own stated default. The rules:

- label: the value of a `FIELD:` line if the reply has one, else the whole reply. The label
  words found there (case-insensitive, whole words, so SUPPORTED is not read inside
  UNSUPPORTED) must all be the same label; a label right after "not" makes the reply unreadable.
- score: the number of a `SCORE:` line if there is one, else the number on a line of its own.
  "0.8", ".8", "80%", "8/10" and "0.8/1" are read; a number above 1 without "%" or a
  denominator is ambiguous (a 0-10 scale?) and unreadable, as is anything outside [0, 1].
- claims: one per line; when some line is a list item (a bullet, "1.", "Claim 2:"), only
  list items are claims, so an intro line ("Here is the restated answer") takes no slot;
  bullets and numbering are stripped; headings ("Claims:"), lines with fewer than two words and
  repeats are dropped; at most `max_claims` are kept and the rest counted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

_NUMBER = r"(?<![\w.+-])(\d+(?:\.\d+)?|\.\d+)"  # unsigned: "-0.3" is not read as 0.3
_UNIT = r"\s*(%|/\s*(?:1|10|100)(?![\w.]))?"
_SCORE_VALUE = re.compile(_NUMBER + _UNIT)
_BARE_SCORE_LINE = re.compile(r"^[\s*_`#>(\[]*" + _NUMBER + _UNIT + r"[\s*_`)\].,;!]*$")
_MARKUP = re.compile(r"\*\*|__|`")  # emphasis and code marks; other markup is edge noise


def _field_value(text: str, field: str) -> str | None:
    """The text after `FIELD:` on the first line that starts with it (markdown ignored)."""
    pattern = re.compile(r"^\W*" + re.escape(field) + r"\W*?\s*[:=]\s*(.*)$", re.IGNORECASE)
    for line in text.splitlines():
        m = pattern.match(_MARKUP.sub("", line).strip())
        if m:
            return m.group(1)
    return None


def parse_label(text: str, labels: Sequence[str], field: str | None = None) -> str | None:
    """The one label of `labels` that the reply gives, or None (see the module docstring)."""
    value = _field_value(text, field) if field else None
    region = value if value is not None else text
    words = re.compile(r"(?<![\w-])(not\s+)?(" + "|".join(map(re.escape, labels)) + r")(?![\w-])",
                       re.IGNORECASE)
    found = set()
    for m in words.finditer(region):
        if m.group(1):
            return None  # "not SUPPORTED" names a label it denies
        found.add(m.group(2).upper())
    if len(found) != 1:
        return None
    (label,) = found
    return next(x for x in labels if x.upper() == label)


def _score_from(match: re.Match[str]) -> float | None:
    value = float(match.group(1))
    unit = (match.group(2) or "").replace(" ", "")
    if unit == "%":
        value /= 100
    elif unit:
        value /= float(unit[1:])
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return None
    return value


def parse_score(text: str, field: str = "score") -> float | None:
    """A score in [0, 1], or None (see the module docstring)."""
    value = _field_value(text, field)
    if value is not None:
        m = _SCORE_VALUE.search(value)
        return _score_from(m) if m else None
    scores = {_score_from(m) for m in map(_BARE_SCORE_LINE.match, text.splitlines()) if m}
    return scores.pop() if len(scores) == 1 else None


@dataclass(frozen=True)
class Claims:
    claims: list[str]
    dropped: int  # readable claims beyond max_claims


_BULLET = re.compile(r"^\s*(?:[-*•]+|\(?\d+[.)]|\(?[a-z][.)](?=\s)|claim\s*\d*\s*[:.)-])\s*",
                     re.IGNORECASE)


def parse_claims(text: str, max_claims: int) -> Claims:
    """The claims of a one-claim-per-line reply (see the module docstring)."""
    if max_claims < 1:
        raise ValueError("max_claims must be >= 1")
    claims: list[str] = []
    seen: set[str] = set()
    lines = [_MARKUP.sub("", line) for line in text.splitlines()]
    if any(_BULLET.match(line) for line in lines):  # a list: an intro line is no claim
        lines = [line for line in lines if _BULLET.match(line)]
    for line in lines:
        line = _BULLET.sub("", line).strip().strip('"').strip()
        if line.endswith(":") or len(re.findall(r"[^\W\d_]\w*", line)) < 2:
            continue
        key = " ".join(re.findall(r"\w+", line.lower()))
        if key in seen:
            continue
        seen.add(key)
        claims.append(line)
    return Claims(claims[:max_claims], max(0, len(claims) - max_claims))


@dataclass(frozen=True)
class ReferenceAnswer:
    text: str | None  # the answer as written; None when the reply says the passages do not say
    not_stated: bool


_NOT_STATED = re.compile(
    r"\b(?:not\s+(?:stated|mentioned|given|specified|provided|known)|"
    r"(?:is|are|was|remains?)\s+unknown|no\s+(?:answer|"
    r"information|mention)|do(?:es)?\s*(?:not|n't)\s+(?:state|mention|say|give|specify|provide|"
    r"contain))\b", re.IGNORECASE)


def parse_reference_answer(text: str, field: str = "answer") -> ReferenceAnswer | None:
    """A short answer read off reference passages: the `ANSWER:` value if the reply has one,
    else its first non-empty line. A reply saying the passages do not give the answer ("NOT
    STATED", "unknown", "the passages do not mention ...") is `not_stated`; a reply without a
    letter or digit is unreadable (None). Only the first line of the value counts."""
    value = _field_value(text, field)
    if value is None:
        value = next((line for line in text.splitlines() if line.strip()), "")
    value = _MARKUP.sub("", value).strip().strip("\"'").strip().rstrip(".").strip()
    if not re.search(r"[^\W_]", value):
        return None
    # "unknown" alone says so; inside a name ("Tomb of the Unknown Soldier") it is the answer
    if _NOT_STATED.search(value) or value.lower() == "unknown":
        return ReferenceAnswer(None, True)
    return ReferenceAnswer(value, False)

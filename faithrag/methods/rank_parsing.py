"""Reading the re-ranking stages' model output: a conflicting pair, a cross-validation verdict, a
ranking permutation. Each parser repairs what it can by a fixed rule, counts every repair, and
marks output it cannot read as failed; it never invents an answer.

Ids in prompts are 1-based ("[3]"); parsers return 0-based indices.

Rules:
- Ids are read from the first block of consecutive non-empty lines that each hold an id (so a
  one-line "[2] > [1]" and one id per line both work, and a later explanation is ignored). When
  the text has a bracketed id ("[3]") anywhere, only bracketed ids count (so the "3" of "the 3
  passages:" in an intro line is no id); otherwise every run of ASCII digits does.
- Permutation (`parse_permutation`): keep the first occurrence of each valid id in the order
  written; drop duplicates ("duplicate") and ids outside 1..n ("out_of_range"); append the ids
  never named in their input order ("missing"). No valid id at all: status failed, input order.
- Pair (`parse_pair`): the text after a "Conflict:" label (else the whole text). If it starts
  with a negation ("None", "No", "N/A", "There is no ...") there is no conflict, and so if the
  label itself is negated ("No conflict:", "There is no conflict:"). Otherwise the
  first two distinct valid ids are the pair; duplicates, out-of-range ids and ids beyond the
  second ("extra") are counted. Fewer than two valid ids: status failed, no pair.
- Verdict (`parse_verdict`): the last verdict label — "False passage:" anywhere, or a line
  starting with "False:", "Remove:" or "Verdict:" — must be followed on its line by a negation
  ("None", "Neither": the two do not really conflict) or by exactly one of the two labels ("A" or
  "B", optionally "[A]" or "Passage A"); anything else fails. The reason is the text before the
  verdict label, after a "Reason:" label if there is one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

STATUS_OK = "ok"
STATUS_REPAIRED = "repaired"
STATUS_NONE = "none"  # the model said explicitly that there is no conflict
STATUS_FAILED = "failed"

_BRACKETED = re.compile(r"\[\s*([0-9]+)\s*\]")
_DIGITS = re.compile(r"[0-9]+")
_CONFLICT_LABEL = re.compile(r"conflict\s*:", re.IGNORECASE)
_NEGATED_LABEL = re.compile(r"\b(?:no|not\s+any|there\s+(?:is|are)\s+no)\s+conflict\s*:$",
                            re.IGNORECASE)
_NEGATION = re.compile(
    r"^[\s\"'`*_(\[]*(?:none|no|n/?a|nothing|neither|there\s+(?:is|are)\s+no)\b", re.IGNORECASE)
# "False passage:" anywhere (small models put it at the end of the reason line), or a line that
# starts with "False:", "Remove:" or "Verdict:"
_VERDICT = re.compile(
    r"(?:\bfalse\s+passage[\s*_]*[:=-]|^[\s*_#>-]*(?:false|remove|verdict)[\s*_]*[:=-])"
    r"[\s*_]*([^\n]*)", re.IGNORECASE | re.MULTILINE)
_REASON_LABEL = re.compile(r"reason[\s*_]*:", re.IGNORECASE)
MAX_REASON_CHARS = 600


@dataclass(frozen=True)
class ParsedPermutation:
    order: list[int]  # a permutation of range(n)
    status: str  # ok | repaired | failed
    repairs: dict[str, int] = field(default_factory=dict)  # only non-zero counts


@dataclass(frozen=True)
class ParsedPair:
    pair: tuple[int, int] | None  # 0-based, in the order named
    status: str  # ok | repaired | none | failed
    repairs: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedVerdict:
    false_label: str | None  # "A" or "B"
    reason: str
    status: str  # ok | none (the pair does not really conflict) | failed
    repairs: dict[str, int] = field(default_factory=dict)  # none: a verdict is read or not


Parsed = ParsedPermutation | ParsedPair | ParsedVerdict


def _ids_in_first_block(text: str) -> list[int]:
    pattern = _BRACKETED if _BRACKETED.search(text) else _DIGITS
    ids: list[int] = []
    for line in text.splitlines():
        found = pattern.findall(line)
        if found:
            ids.extend(int(x) for x in found)
        elif ids:
            break
    return ids


def _valid_ids(ids: list[int], n: int, limit: int | None = None
               ) -> tuple[list[int], dict[str, int]]:
    """First occurrences of ids in 1..n, 0-based, at most `limit`; repairs counted."""
    kept: list[int] = []
    seen: set[int] = set()
    repairs = {"duplicate": 0, "out_of_range": 0, "extra": 0}
    for i in ids:
        if not 1 <= i <= n:
            repairs["out_of_range"] += 1
        elif i - 1 in seen:
            repairs["duplicate"] += 1
        elif limit is not None and len(kept) >= limit:
            repairs["extra"] += 1
        else:
            kept.append(i - 1)
            seen.add(i - 1)
    return kept, repairs


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def parse_permutation(text: str, n: int) -> ParsedPermutation:
    """A ranking of n passages from output like "[2] > [3] > [1]" (see the module rules)."""
    if n < 0:
        raise ValueError("n must be >= 0")
    kept, repairs = _valid_ids(_ids_in_first_block(text), n)
    seen = set(kept)
    missing = [i for i in range(n) if i not in seen]
    repairs = _nonzero({**repairs, "missing": len(missing)})
    if n and not kept:
        return ParsedPermutation(list(range(n)), STATUS_FAILED, repairs)
    return ParsedPermutation(kept + missing, STATUS_REPAIRED if repairs else STATUS_OK, repairs)


def parse_pair(text: str, n: int) -> ParsedPair:
    """The conflicting pair among n passages from output like "Conflict: [2] [5]"."""
    label = _CONFLICT_LABEL.search(text)
    segment = text[label.end():] if label else text
    negated_label = label is not None and _NEGATED_LABEL.search(
        text[text.rfind("\n", 0, label.start()) + 1:label.end()])
    if negated_label or _NEGATION.match(segment.lstrip()):
        return ParsedPair(None, STATUS_NONE)
    kept, repairs = _valid_ids(_ids_in_first_block(segment), n, limit=2)
    repairs = _nonzero(repairs)
    if len(kept) < 2:
        return ParsedPair(None, STATUS_FAILED, repairs)
    return ParsedPair((kept[0], kept[1]), STATUS_REPAIRED if repairs else STATUS_OK, repairs)


def _labels_in(value: str) -> set[str]:
    return set(re.findall(r"(?<![A-Za-z0-9])([AB])(?![A-Za-z0-9])", value))


def parse_verdict(text: str) -> ParsedVerdict:
    """Which of passages A and B the cross-validation judged false, and why."""
    verdicts = list(_VERDICT.finditer(text))
    before = text[: verdicts[-1].start()] if verdicts else text
    label = _REASON_LABEL.search(before)
    reason = " ".join((before[label.end():] if label else before).split())
    reason = reason.strip(" *_")[:MAX_REASON_CHARS]
    if not verdicts:
        return ParsedVerdict(None, reason, STATUS_FAILED)
    value = verdicts[-1].group(1)
    if _NEGATION.match(value):
        return ParsedVerdict(None, reason, STATUS_NONE)
    labels = _labels_in(value)
    if len(labels) != 1:
        return ParsedVerdict(None, reason, STATUS_FAILED)
    return ParsedVerdict(labels.pop(), reason, STATUS_OK)


def tally(parsed: list[Parsed]) -> dict:
    """Counts over several parses, as recorded in the trace: outputs read, failed, repaired,
    and the repairs by kind."""
    repairs: dict[str, int] = {}
    for p in parsed:
        for kind, count in p.repairs.items():
            repairs[kind] = repairs.get(kind, 0) + count
    return {"outputs": len(parsed),
            "failed": sum(p.status == STATUS_FAILED for p in parsed),
            "repaired": sum(p.status == STATUS_REPAIRED for p in parsed),
            "repairs": repairs}

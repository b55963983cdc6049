"""The hostile-retrieval setting `numeric`: poison that changes only a number or a date.

Built from the dev split of two shared sets, for questions that ask for a quantity ("When",
"How many", "population", ...) and whose gold answer states one quantity in digits (a number,
with or without a unit, or a date with a year; at most four other words) that the clean
document holding it states too (faithrag.quantities.compare):

kre_squad
    Clean document: the item's golden context; gold: its golden answer. Trusted knowledge
    base: every such item's golden context (as in the kre_squad setting).
ramdocs
    Clean documents: the item's `correct` and `noise` documents (no `misinfo` one); gold: every
    gold answer. The altered document is the first `correct` one whose answer states a gold
    quantity. Trusted knowledge base: the items' `correct` documents.

Poison, two passages: the clean document with every mention of the gold value rewritten to
another value of the same kind, in the same format and with the same words and units (a date's
year, or a bare year where the question asks for a date or a year, moved by 3 to 12 years; a
number scaled by 0.5 to 2 and rounded as the original is: "200,000 Danish krone" becomes
"120,000 Danish krone"), and the sentence of that rewritten document that first states it.
The target is the gold answer with the same rewrite. Items alternate between the two sources
(kre_squad first), so any first N items hold both. The rewrite is
seeded by the item id. Answers are scored by value (`numeric_containment`): "8849 m" holds
"8,849 metres".

Default: k = 3, the two poisoned passages at ranks 0-1.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from itertools import zip_longest

from faithrag.answers import Agreement, compare_answers, normalize_answer, same_answer
from faithrag.eval.datasets import ContextDoc, QAItem, load_dataset
from faithrag.quantities import Quantity, compare, prepare, quantities, remainder
from faithrag.types import Passage

YEAR_SHIFTS = (-12, -9, -7, -5, -4, -3, 3, 4, 5, 7, 9, 12)
SCALES = (0.5, 0.6, 0.75, 1.25, 1.5, 2.0)
MAX_OTHER_WORDS = 4
_ASKS_QUANTITY = re.compile(
    r"\b(?:when|how (?:many|much|long|old|far|large|big|tall|high|great|deep|wide|fast)|"
    r"what (?:year|date|month|decade|century|percentage|percent|population|age|size|"
    r"temperature)|which year|population|median age)\b")
_ASKS_YEAR = re.compile(r"\b(?:when|what year|which year|what date)\b")
_DIGITS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Rewrite:
    """How a gold quantity is changed: a year to another year, or a number to another number
    (`old` and `new` as numbers, before any scale word)."""

    is_year: bool
    old: float
    new: float

    def apply(self, text: str) -> str | None:
        """`text` with every mention of the gold value rewritten (None when it has none)."""
        prepared = prepare(text)
        if len(prepared) != len(text):
            return None
        out, last, changed = [], 0, False
        ends = [e for q in quantities(text) for e in ((q.low, q.high) if q.kind == "range"
                                                       else (q,))]
        for q in ends:
            span = text[q.start:q.end]
            rewritten = self._rewrite_span(q, span)
            if rewritten is not None:
                out += [text[last:q.start], rewritten]
                last, changed = q.end, True
        out.append(text[last:])
        return "".join(out) if changed else None

    def _rewrite_span(self, q: Quantity, span: str) -> str | None:
        for match in _DIGITS.finditer(span):
            digits = match.group(0)
            value = float(digits.replace(",", ""))
            if value != self.old or (self.is_year and not _holds_year(q, int(self.old))):
                continue
            if not self.is_year and q.kind != "number":
                continue
            return span[:match.start()] + _format_like(self.new, digits) + span[match.end():]
        return None


def _holds_year(q: Quantity, year: int) -> bool:
    return (q.kind == "date" and q.year == year) or (q.kind == "number" and q.year_like)


def _format_like(value: float, digits: str) -> str:
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return f"{value:,.{decimals}f}" if "," in digits else f"{value:.{decimals}f}"


def asks_quantity(question: str) -> bool:
    """The question asks for a number or a date ("When ...", "How many ...", "... population")."""
    return _ASKS_QUANTITY.search(question.lower()) is not None


def asks_year(question: str) -> bool:
    """The question asks for a date or a year: its bare integer answer is a year."""
    return _ASKS_YEAR.search(question.lower()) is not None


def _key_quantity(answer: str) -> Quantity | None:
    """The one quantity in digits of `answer`: a number (not a clock time) or a dated year,
    with at most MAX_OTHER_WORDS other words ("about 1820", "300 acres")."""
    found = quantities(answer)
    if len(found) != 1 or not any(c.isdigit() for c in found[0].text):
        return None
    if len(normalize_answer(remainder(answer)).split()) > MAX_OTHER_WORDS:
        return None
    q = found[0]
    if q.kind == "date" and q.year is not None and q.year > 0 and q.span is None:
        return q
    if q.kind == "number" and q.dimension != "clock" and q.value and q.value > 0:
        return q
    return None


def rewrite_for(q: Quantity, seed: str, asks_year: bool) -> Rewrite:
    """The rewrite of quantity `q` (from `_key_quantity`), seeded by `seed`; a bare integer is a
    year when the question `asks_year`."""
    rng = random.Random(f"numeric:{seed}")
    if q.kind == "date" or (q.year_like and asks_year):
        year = q.year if q.kind == "date" else int(q.value)
        shift = rng.choice(YEAR_SHIFTS)
        new = year + shift if year + shift <= 2024 else year - abs(shift)
        return Rewrite(True, float(year), float(new))
    old = q.value / q.scale
    decimals = max(q.decimals + round(math.log10(q.scale)), 0)
    if old == int(old) and decimals == 0:
        trailing = len(str(int(old))) - len(str(int(old)).rstrip("0"))
        step = 10 ** min(trailing, max(len(str(int(old))) - 2, 0))
        new = old
        while new == old or new <= 0:
            new = float(round(old * rng.choice(SCALES) / step) * step) if old >= 10 else \
                old + rng.choice((1, 2, 3))
        return Rewrite(False, old, new)
    new = old
    while new == old:
        new = round(old * rng.choice(SCALES), decimals)
    return Rewrite(False, old, new)


def _first_sentence_with(text: str, original: str) -> str:
    """The sentence of `text` (the rewritten document) that differs from `original`'s."""
    for new, old in zip_longest(_SENTENCE_END.split(text), _SENTENCE_END.split(original)):
        if new != old and new:
            return new
    return text


def _kre_rows(data_dir: str | None):
    source = load_dataset("kre_squad", data_dir)
    rows = []
    for item in source.items:
        golden, gold = item.meta["golden_context"], item.meta["golden_answer"]
        q = _key_quantity(gold)
        if (q is None or not asks_quantity(item.question)
                or not any(compare(q, x) is True for x in quantities(golden))):
            continue
        rewrite = rewrite_for(q, item.id, asks_year(item.question))
        poisoned, target = rewrite.apply(golden), rewrite.apply(gold)
        if poisoned is None or target is None or same_answer(target, gold):
            continue
        rows.append((item, [gold], target, [ContextDoc(golden)], ("", golden, poisoned),
                     [("", golden)]))
    return source, rows


def _ramdocs_rows(data_dir: str | None):
    source = load_dataset("ramdocs", data_dir)
    rows = []
    for item in source.items:
        if not asks_quantity(item.question):
            continue
        clean = [d for d in item.context or [] if d.doc_type != "misinfo"]
        correct = [d for d in clean if d.doc_type == "correct"]
        for doc in correct:
            q = _key_quantity(doc.doc_answer or "")
            if q is None or not any(compare(q, g) is True for a in item.answers
                                    for g in quantities(a)):
                continue
            rewrite = rewrite_for(q, item.id, asks_year(item.question))
            poisoned, target = rewrite.apply(doc.text), rewrite.apply(doc.doc_answer)
            if poisoned is None or target is None or any(
                    compare_answers(target, a) is not Agreement.DISAGREE for a in item.answers):
                continue  # the changed value must differ from every gold answer
            rows.append((item, list(item.answers), target, clean,
                         (doc.title, doc.text, poisoned), [(d.title, d.text) for d in correct]))
            break
    return source, rows


def build_numeric(data_dir: str | None):
    """(sources, rows, trusted, notes) for faithrag.eval.hostile_settings to assemble."""
    kre, kre_rows = _kre_rows(data_dir)
    ramdocs, ramdocs_rows = _ramdocs_rows(data_dir)
    rows, trusted = [], []
    for row in (r for pair in zip_longest(kre_rows, ramdocs_rows) for r in pair if r):
        item, gold, target, clean, (title, original, poisoned), trusted_texts = row
        qa = QAItem(id=item.id, source=item.source, question=item.question, context=clean,
                    answer=gold[0], answers=gold, meta={"target_incorrect_answer": [target]})
        poison = [Passage(f"{item.id}#p0", poisoned, title, "context"),
                  Passage(f"{item.id}#p1", _first_sentence_with(poisoned, original), title,
                          "context")]
        rows.append((qa, poison))
        trusted.extend(Passage(f"kb:{item.id}#{i}", text, doc_title, "numeric:trusted")
                       for i, (doc_title, text) in enumerate(trusted_texts))
    notes = {"from_kre_squad": len(kre_rows), "from_ramdocs": len(ramdocs_rows)}
    return [kre, ramdocs], rows, trusted, notes

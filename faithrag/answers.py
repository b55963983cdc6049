"""Answer normalisation and matching, shared by the methods and the evaluation.

``golds`` is a list of accepted aliases; every function takes the best alias.

- ``normalize_answer``: the official SQuAD v1.1 normalisation (lower-case, drop ASCII
  punctuation, drop the articles a/an/the, collapse whitespace).
- ``exact_match`` / ``f1_score``: SQuAD EM and token F1 on normalised text (F1 with SQuAD v2's
  rule for empty answers: 1 if both are empty, else 0).
- ``containment``: some normalised alias occurs in the normalised prediction as a whole-token
  run (the CSRAG paper's "answer contained in the output" accuracy; whole tokens, so gold "1"
  is not found in "1960"). The one departure from SQuAD normalisation: a decimal point between
  digits is kept, so "1.5 million" is not found in "15 million".
- ``numeric_containment``: containment by value: every quantity of the alias (numbers, dates,
  units, faithrag.quantities) is stated by the prediction ("8849 m" holds "8,849 metres",
  "about 15 million" does not hold "1.5 million"); an alias without a quantity falls back to
  ``containment``.
- ``smart_em``: see its docstring (yes/no synonyms, dates, numbers, short containment).
- ``attack_success``: the prediction gives the attacker's target answer.
- ``compare_answers``: THE answer equivalence of faithrag, which every stage that decides
  whether two answers agree uses: AGREE, DISAGREE or CANNOT_TELL (never a score);
  ``same_answer`` is its AGREE.

Example::

    >>> from faithrag.answers import compare_answers, containment, smart_em
    >>> containment("It was the Eiffel Tower, built in 1889.", ["Eiffel Tower"])
    True
    >>> smart_em("June 5, 1990", ["1990-06-05"])
    True
    >>> compare_answers("8,849 metres above sea level", "5,200 metres above sea level").value
    'disagree'
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from enum import Enum
from functools import lru_cache
from importlib.resources import files

from faithrag.quantities import compare, quantities, remainder, vague, words_value

# ---------------------------------------------------------------- answer normalisation

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_DECIMAL_POINT = re.compile(r"(?<=\d)\.(?=\d)")


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """NLTK's English stopword list (179 words), shipped with the package for offline use."""
    text = (files("faithrag") / "data" / "stopwords" / "english.txt").read_text(encoding="utf-8")
    return frozenset(w for w in text.split("\n") if w and not w.startswith("#"))


def normalize_answer(text: str) -> str:
    """Official SQuAD v1.1 normalisation."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> bool:
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(g) for g in golds)


def _f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    same = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision = same / len(prediction_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    pred = normalize_answer(prediction).split()
    return max((_f1(pred, normalize_answer(g).split()) for g in golds), default=0.0)


def _contains_run(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def _containment_tokens(text: str) -> list[str]:
    return normalize_answer(_DECIMAL_POINT.sub("point", text)).split()


def containment(prediction: str, golds: Sequence[str]) -> bool:
    pred = _containment_tokens(prediction)
    return any(_contains_run(pred, _containment_tokens(g)) for g in golds)


def numeric_containment(prediction: str, golds: Sequence[str]) -> bool:
    """Some alias is held by the prediction by value: each of the alias's quantities equals
    one of the prediction's (faithrag.quantities.compare); an alias without a quantity is
    matched by ``containment``."""
    stated = quantities(prediction)
    for gold in golds:
        wanted = quantities(gold)
        if not wanted:
            if containment(prediction, [gold]):
                return True
        elif all(any(compare(q, p) is True for p in stated) for q in wanted):
            return True
    return False


# ---------------------------------------------------------------- smart EM

YES_WORDS = frozenset({"yes", "true", "correct", "right", "yeah", "yep", "affirmative", "indeed"})
NO_WORDS = frozenset({"no", "false", "incorrect", "wrong", "nope", "negative"})
# Containment counts in smart EM only when the longer side has at most this many tokens.
SHORT_ANSWER_TOKENS = 12

_MONTHS = {name: i for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}
_MONTHS.update({name[:3]: i for name, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{3,4})"
_MONTH = rf"(?P<month>{_MONTH_RE})\.?"
_ISO_DATE = re.compile(r"\b(?P<year>\d{4})-(?P<mnum>[01]?\d)-(?P<day>[0-3]?\d)\b", re.ASCII)
_DATE_PATTERNS = [  # on normalised text (no punctuation, no articles); most specific first
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE | re.ASCII),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE | re.ASCII),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE | re.ASCII),
    re.compile(rf"\b{_MONTH}\s+{_DAY}\b", re.IGNORECASE | re.ASCII),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b", re.IGNORECASE | re.ASCII),
    re.compile(rf"\b{_MONTH}(?!\w)", re.IGNORECASE | re.ASCII),  # a month name on its own
]

_UNITS = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
     "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
     "nineteen"])}
_TENS = {w: 10 * i for i, w in enumerate(
    ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2)}
_SCALES = frozenset({"thousand", "million", "billion"})  # the scale words canonical_answer reads
_ORDINAL_WORDS = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
    "eighteenth", "nineteenth", "twentieth"]


def _ordinal_suffix(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


_ORDINALS = {word: f"{i}{_ordinal_suffix(i)}" for i, word in enumerate(_ORDINAL_WORDS, start=1)}
_HYPHENATED_NUMBER = re.compile(
    rf"\b({'|'.join(_TENS)})-({'|'.join(list(_UNITS)[1:10])})\b", re.IGNORECASE | re.ASCII)
_HYPHENATED_ORDINAL = re.compile(
    rf"\b({'|'.join(_TENS)})-({'|'.join(_ORDINAL_WORDS[:9])})\b", re.IGNORECASE | re.ASCII)
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}\b)")


def _date_replacement(match: re.Match[str]) -> str:
    groups = match.groupdict()
    month = (int(groups["mnum"]) if groups.get("mnum")
             else _MONTHS[groups["month"].lower()])
    day = int(groups["day"]) if groups.get("day") else None
    if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
        return match.group(0)
    parts = [groups["year"]] if groups.get("year") else []
    parts.append(f"month{month}")
    if day is not None:
        parts.append(str(day))
    return " ".join(parts)


def _canonical_dates(text: str) -> str:
    """Rewrite the dates of SQuAD-normalised text as "<year> month<M> <day>" (the parts that are
    present): "june 5 1990" and "5th of june 1990" become "1990 month6 5", "june" alone "month6".
    Working on normalised text, an article or a comma between the parts changes nothing. No
    pattern matches the output, so the rewrite is idempotent."""
    for pattern in _DATE_PATTERNS:
        text = pattern.sub(_date_replacement, text)
    return text


def _continues_number(previous: str, token: str) -> bool:
    """Whether ``token`` can extend a number that ends with ``previous`` ("twenty" + "one" can,
    "one" + "two" and "twenty" + "thirty" cannot)."""
    if token in _UNITS:
        return previous in _SCALES or previous == "hundred" or (
            previous in _TENS and 0 < _UNITS[token] < 10)
    if token in _TENS:
        return previous in _SCALES or previous == "hundred"
    if token == "hundred":
        return previous in _UNITS or previous in _TENS or previous.isdigit()
    return previous != token  # a scale word: "two hundred thousand", not "thousand thousand"


def _canonical_numbers(tokens: list[str]) -> list[str]:
    """Number words to digits ("three" -> "3", "one hundred and five" -> "105", "10 million"
    -> "10000000") and ordinal
    words to "1st".."20th" (hyphenated ones such as "twenty-first" are rewritten earlier)."""
    out: list[str] = []
    run: list[str] = []
    scale_words = _SCALES | {"hundred"}
    number_words = _UNITS.keys() | _TENS.keys() | scale_words

    def flush() -> None:
        if run:
            out.append(str(int(words_value(run))))
            run.clear()

    for i, token in enumerate(tokens):
        if token.isdigit() and i + 1 < len(tokens) and tokens[i + 1] in scale_words:
            flush()  # digits that a scale word multiplies lead a number: "10 million"
            run.append(token)
        elif token in number_words:
            if run and not _continues_number(run[-1], token):
                flush()
            run.append(token)
        elif (token == "and" and run and run[-1] in ("hundred", *_SCALES)
              and i + 1 < len(tokens) and tokens[i + 1] in number_words):
            continue
        else:
            flush()
            out.append(_ORDINALS.get(token, token))
    flush()
    return out


def _hyphenated_ordinal(match: re.Match[str]) -> str:
    number = _TENS[match.group(1).lower()] + _ORDINAL_WORDS.index(match.group(2).lower()) + 1
    return f"{number}{_ordinal_suffix(number)}"


def canonical_answer(text: str) -> str:
    """The form smart EM compares: SQuAD-normalised, dates and number words rewritten. What
    needs punctuation is rewritten first: ISO dates ("1990-06-05" = "June 5, 1990"), hyphenated
    numbers, thousands commas and decimal points ("3.5" stays apart from "35")."""
    text = _ISO_DATE.sub(_date_replacement, text)
    text = _HYPHENATED_NUMBER.sub(r"\1 \2", text)
    text = _HYPHENATED_ORDINAL.sub(_hyphenated_ordinal, text)
    text = _THOUSANDS_COMMA.sub("", text)
    text = _DECIMAL_POINT.sub("point", text)
    return " ".join(_canonical_numbers(_canonical_dates(normalize_answer(text)).split()))


def yes_no_polarity(text: str) -> str | None:
    """"yes", "no" or None. Read from the first word ("True.", "No, because ..."; "not true" is
    no), else from "answer is yes/no" anywhere in the text."""
    tokens = normalize_answer(text).split()
    if not tokens:
        return None
    if tokens[0] == "not" and len(tokens) > 1 and tokens[1] in YES_WORDS:
        return "no"
    if tokens[0] in YES_WORDS:
        return "yes"
    if tokens[0] in NO_WORDS:
        return "no"
    found = re.search(r"\banswer (?:is )?(yes|no)\b", " ".join(tokens))
    return found.group(1) if found else None


def _gold_polarity(gold: str) -> str | None:
    tokens = normalize_answer(gold).split()
    if tokens in (["not", "true"], ["not", "correct"]):
        return "no"
    if len(tokens) == 1 and tokens[0] in YES_WORDS:
        return "yes"
    if len(tokens) == 1 and tokens[0] in NO_WORDS:
        return "no"
    return None


def smart_em(prediction: str, golds: Sequence[str]) -> bool:
    """Lenient exact match for free-form answers, alias by alias:

    - a yes/no gold (one synonym word: yes/true/correct/right/..., no/false/incorrect/wrong/...)
      matches iff the prediction's polarity (``yes_no_polarity``) is the same;
    - otherwise both sides are put in canonical form (``canonical_answer``: dates as
      "<year> month<M> <day>", number words as digits, "1,000" = "1000", SQuAD normalisation) and
      match if equal, or, when the longer side has at most SHORT_ANSWER_TOKENS tokens, if the
      gold is a whole-token run of the prediction, or the prediction is a run of the gold that
      covers more than half of the gold's tokens ("von Trier" for "Lars von Trier", but not
      "Trier", nor "lower" for "lower chamber").
    """
    pred = canonical_answer(prediction).split()
    for gold in golds:
        polarity = _gold_polarity(gold)
        if polarity is not None:
            if yes_no_polarity(prediction) == polarity:
                return True
            continue
        gold_tokens = canonical_answer(gold).split()
        if not gold_tokens or not pred:
            continue
        if pred == gold_tokens:
            return True
        if max(len(pred), len(gold_tokens)) > SHORT_ANSWER_TOKENS:
            continue
        if _contains_run(pred, gold_tokens):
            return True
        if 2 * len(pred) > len(gold_tokens) and _contains_run(gold_tokens, pred):
            return True
    return False


def attack_success(prediction: str, target_answer: str) -> bool:
    """The prediction gives the attacker's target answer: smart EM against the target alone, or,
    for a target that is not yes/no, the target contained in the prediction, the rule accuracy
    uses (so a sentence that states the target counts at any length), by its words or, for a
    target that states a quantity, by value (``numeric_containment``)."""
    return smart_em(prediction, [target_answer]) or (
        _gold_polarity(target_answer) is None and (
            containment(prediction, [target_answer])
            or numeric_containment(prediction, [target_answer])))


# ---------------------------------------------------------------- answer equivalence


class Agreement(str, Enum):
    """Whether two answers give the same answer."""

    AGREE = "agree"
    DISAGREE = "disagree"
    CANNOT_TELL = "cannot_tell"


# Entity answers (no quantity): different when their token F1 is at most this.
ENTITY_DIFFERENCE_F1 = 0.5
# Words that leave a quantity's answer the same ("about 300", "in the year 1887").
_QUANTITY_FILLER = frozenset({
    "a", "an", "the", "about", "approximately", "approx", "around", "roughly", "nearly",
    "almost", "circa", "ca", "c", "some", "over", "under", "more", "less", "than", "just",
    "exactly", "only", "up", "to", "in", "on", "at", "of", "by", "year", "since", "from",
    "between", "and", "or", "was", "is", "it", "its", "total", "estimated", "as", "be",
    "were", "are", "been"})


def compare_answers(a: str, b: str) -> Agreement:
    """Whether answers `a` and `b` agree; symmetric.

    - Empty (after SQuAD normalisation) on either side: CANNOT_TELL.
    - A yes/no answer (one synonym word) against an answer whose polarity can be read
      (``yes_no_polarity``): AGREE when the polarities are the same, else DISAGREE.
    - Both state quantities (faithrag.quantities): each quantity of the side with fewer must
      equal one of the other's. Then AGREE when the words left once the quantities are taken
      out (fillers such as "about", "in the year" ignored) are empty on one side or agree as
      entities (below), else CANNOT_TELL. When some quantity equals none of the other side's,
      and every one it can be compared with differs: DISAGREE, however many words the two
      share ("8,849 metres" vs "5,200 metres"). Otherwise CANNOT_TELL.
    - One states a quantity and the other only a vague amount ("a few", "several hundred"),
      or both only vague amounts: CANNOT_TELL.
    - Otherwise, entity answers: AGREE when smart EM or whole-token containment matches them in
      either direction ("Armstrong" = "Neil Armstrong"), or when one writes some words of the
      other as initials ("Henry J. Kaiser" = "Henry John Kaiser"); DISAGREE when their token
      F1 is at most ENTITY_DIFFERENCE_F1; CANNOT_TELL in between.
    """
    if not normalize_answer(a) or not normalize_answer(b):
        return Agreement.CANNOT_TELL
    polarity = _polarities(a, b)
    if polarity is not None:
        return polarity
    qa, qb = quantities(a), quantities(b)
    if qa and qb:
        verdict = _compare_quantities(qa, qb)
        if verdict is not Agreement.AGREE:
            return verdict
        return _compare_remainders(remainder(a), remainder(b))
    vague_a, vague_b = vague(a), vague(b)
    if (qa and vague_b) or (qb and vague_a) or (vague_a and vague_b and not (qa or qb)):
        return Agreement.CANNOT_TELL
    return _compare_entities(a, b)


def same_answer(a: str, b: str) -> bool:
    """`a` and `b` agree (``compare_answers``): "Armstrong" = "Neil Armstrong", "two" = "2",
    "8,849 m" = "8849 metres", but "1887" is not "1921"."""
    return compare_answers(a, b) is Agreement.AGREE


def _polarities(a: str, b: str) -> Agreement | None:
    first, second = _gold_polarity(a), _gold_polarity(b)
    if first is None and second is None:
        return None
    first = first or yes_no_polarity(a)
    second = second or yes_no_polarity(b)
    if first is None or second is None:
        return None
    return Agreement.AGREE if first == second else Agreement.DISAGREE


def _compare_quantities(qa, qb) -> Agreement:
    fewer, more = (qa, qb) if len(qa) <= len(qb) else (qb, qa)
    unmatched_and_different = False
    all_matched = True
    for q in fewer:
        verdicts = [compare(q, other) for other in more]
        if True in verdicts:
            continue
        all_matched = False
        if False in verdicts:  # comparable with some, and equal to none of them
            unmatched_and_different = True
    if all_matched:
        return Agreement.AGREE
    return Agreement.DISAGREE if unmatched_and_different else Agreement.CANNOT_TELL


def _content(text: str) -> str:
    return " ".join(w for w in normalize_answer(text).split() if w not in _QUANTITY_FILLER)


def _same_name_with_initials(a: str, b: str) -> bool:
    """One name written with initials for some words: as many words, the last one the same on
    both and spelled out, every other word equal or a one-letter word that begins the other
    ("Henry J. Kaiser" = "Henry John Kaiser", "J. R. R. Tolkien" = "John Ronald Reuel
    Tolkien"). A last word never abbreviates ("World War I" is not "World War II", "Louis X"
    not "Louis XIV"), and a dropped initial is not joined ("George Bush", "George W. Bush")."""
    first, second = normalize_answer(a).split(), normalize_answer(b).split()
    if len(first) != len(second) or len(first) < 2 or first == second:
        return False
    if first[-1] != second[-1] or len(first[-1]) < 2:
        return False
    return all(x == y or _initial_of(x, y) or _initial_of(y, x)
               for x, y in zip(first[:-1], second[:-1]))


def _initial_of(initial: str, word: str) -> bool:
    return len(initial) == 1 < len(word) and word.startswith(initial)


def _compare_remainders(a: str, b: str) -> Agreement:
    a, b = _content(a), _content(b)
    if not a or not b or _compare_entities(a, b) is Agreement.AGREE:
        return Agreement.AGREE
    return Agreement.CANNOT_TELL


def _compare_entities(a: str, b: str) -> Agreement:
    if (smart_em(a, [b]) or smart_em(b, [a]) or containment(a, [b]) or containment(b, [a])
            or _same_name_with_initials(a, b)):
        return Agreement.AGREE
    if f1_score(a, [b]) <= ENTITY_DIFFERENCE_F1:
        return Agreement.DISAGREE
    return Agreement.CANNOT_TELL

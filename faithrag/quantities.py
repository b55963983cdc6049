"""The quantities an answer states: numbers, dates, ranges, percentages and measures with units.

``quantities(text)`` reads every quantity of a short answer (or a sentence) and where it
stands; ``compare(a, b)`` says whether two quantities are the same value, different values,
or not comparable (None). faithrag.answers builds the answer equivalence on these two.

What is read (case-insensitive):
- numbers in digits, with thousands commas ("8,849"), decimals ("1.5"), a sign ("-3", "−3"),
  fractions ("3/4"), ordinals ("21st"), a scale word ("1.5 million", "2 bn") and, after a
  currency sign, "m", "bn", "k" ("$5m");
- numbers in words: "twelve", "twenty-one", "one hundred and five", "a dozen", "a million",
  ordinal words ("third"); "half a million";
- dates: ISO ("1990-06-05"), "5 June 1990", "June 5, 1990", "June 1990", "5 June", "June 5",
  day-first or month-first slashes when one part is over 12 ("25/12/1990"; an ambiguous one
  keeps its year only), decades ("1880s"), centuries ("19th century"), years with an era
  ("300 BC" is year -300); a month name alone only when it is the whole answer ("in May");
  a bare integer from 100 to 2199 without separators may be a year and compares with dates;
- ranges: "1900 to 1904", "1900-1904", "1900–04", "between 5 and 10 km", "from 4 August
  1915 until November 1918" (a unit or scale word on the second end applies to both);
- percentages ("12%", "12 percent", "12 per cent") and units: lengths, masses, areas,
  temperatures (°C / °F / K), durations (seconds to weeks; months and years each on their
  own), speeds and currencies (never converted between each other).

Words that state an amount without a value ("a few", "several hundred", "dozens") are
``vague``: an answer that holds one cannot be compared by value.

Comparison: two numbers in the same unit, or one without a unit, are the same only when equal
(1.5 million is not 15 million, 3/4 is not 34); in two convertible units they are the same when
one of them, converted and rounded to the precision the other is written with, gives the other
("12 °C" = "53.6 °F" = "54 °F", "100 km" = "62 miles"; "10 km" is not "10 miles"). Two dates are
the same when every field both give (year, month, day) is equal: a year agrees with a full date
in that year, two different years never agree; a decade or century agrees with a year inside it.
Two ranges are the same when both ends are; a value inside a range, or at one end, is not
comparable with it; a value outside it differs. Different dimensions are not comparable.

Example::

    >>> from faithrag.quantities import compare, quantities
    >>> [q.text for q in quantities("about 8,849 metres above sea level")]
    ['8,849 metres']
    >>> compare(quantities("12 °C")[0], quantities("53.6 °F")[0])
    True
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache

from faithrag.units import (
    BARE_LETTER_UNITS,
    CURRENCY_SCALES,
    CURRENCY_SIGNS,
    SCALE_WORDS,
    TEMPERATURES,
    UNIT_TABLE,
    convert,
    convertible,
    read_unit,
    to_base,
)


def _alternation(words) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_UNIT_RE = _alternation([*UNIT_TABLE, *(t for t in TEMPERATURES if t not in BARE_LETTER_UNITS)])

# ---------------------------------------------------------------- number words

_ONES = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
     "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
     "nineteen"])}
_TENS = {w: 10 * i for i, w in enumerate(
    ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2)}
_ORDINAL_WORDS = {w: i for i, w in enumerate(
    ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
     "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
     "seventeenth", "eighteenth", "nineteenth", "twentieth"], start=1)}
_ORDINAL_TENS = {"twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50,
                 "sixtieth": 60, "seventieth": 70, "eightieth": 80, "ninetieth": 90,
                 "hundredth": 100}
_NUMBER_WORD_RE = _alternation(list(_ONES) + list(_TENS) + ["hundred", "dozen"]
                               + [w for w in SCALE_WORDS if len(w) > 3])
_ORDINAL_WORD_RE = _alternation(list(_ORDINAL_WORDS) + list(_ORDINAL_TENS))

_VAGUE = re.compile(
    r"\b(?:a\s+few|few|several|many|numerous|various|multiple|countless|some\s+(?:hundred|"
    r"thousand|million)s?|dozens|scores|hundreds|thousands|millions|billions|a\s+couple|"
    r"a\s+handful|a\s+number\s+of|a\s+lot)\b")

# ---------------------------------------------------------------- dates

_MONTHS = {name: i for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}
_MONTH_ABBREVIATIONS = {name[:3]: i for name, i in _MONTHS.items()} | {"sept": 9}
_MONTH_RE = _alternation(list(_MONTHS) + list(_MONTH_ABBREVIATIONS))
_FULL_MONTH_RE = _alternation(list(_MONTHS))
_D = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_Y = r"(?P<year>\d{3,4})(?:\s*(?P<era>bce|bc|ce|ad)\b)?"
_M = rf"(?P<month>{_MONTH_RE})\.?"
_COMMA = r"(?:\s*,\s*|\s+)"  # "March 18, 2018", "March 18 , 2018", "March 18 2018"
_DATE_PATTERNS = [
    re.compile(r"(?<![\w.])(?P<year>\d{4})-(?P<mnum>[01]?\d)-(?P<day>[0-3]?\d)(?![\w])"),
    re.compile(rf"\b{_D}\s+(?:of\s+)?{_M}{_COMMA}{_Y}(?!\d)"),
    re.compile(rf"\b{_M}\s+{_D}{_COMMA}{_Y}(?!\d)"),
    re.compile(rf"\b{_M}{_COMMA}(?:of\s+)?{_Y}(?!\d)"),
    re.compile(rf"\b{_D}\s+(?:of\s+)?{_M}(?![\w])"),
    re.compile(rf"\b{_M}\s+{_D}(?![\w])"),
]
_SLASH_DATE = re.compile(r"(?<![\w./])(?P<a>[0-3]?\d)/(?P<b>[0-3]?\d)/(?P<year>\d{4})(?![\w/])")
_DECADE = re.compile(r"(?<![\w.])(?P<decade>\d{3}0)'?s\b")
_CENTURY = re.compile(rf"\b(?:(?P<num>\d{{1,2}})(?:st|nd|rd|th)|(?P<word>{_ORDINAL_WORD_RE}))"
                      r"[\s-]+century(?:\s+(?P<era>bce|bc))?\b")
_ERA_YEAR = re.compile(r"(?<![\w.,])(?:(?P<year>\d{1,4})\s*(?P<era>bce|bc|ce|ad)\b|"
                       r"\b(?:ad|ce)\s+(?P<year2>\d{1,4})(?![\w.,]))")
_ALONE_MONTH = re.compile(rf"(?:(?:in|during|early|late|mid|the|month|of)[\s-]+)*"
                          rf"(?P<month>{_FULL_MONTH_RE})")
_TIME = re.compile(r"(?<![\w:.])(?P<h>[0-2]?\d):(?P<m>[0-5]\d)(?:\s*(?P<ampm>a\.?m\.?|p\.?m\.?))?"
                   r"(?![\w:])")

# ---------------------------------------------------------------- numbers in digits

_NUMBER = re.compile(
    rf"(?<![\w.,])(?:(?P<cur>us\$|[$€£¥])\s?)?(?P<sign>[-+])?(?P<cur2>us\$|[$€£¥])?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s*/\s*(?P<den>\d+)(?![\d/]))?"
    r"(?P<ord>st|nd|rd|th)?"
    rf"(?:\s*(?P<scale>{_alternation(SCALE_WORDS)})\b|(?P<curscale>[mkb])\b)?"
    rf"(?:\s*(?P<deg>°|º|degrees?)?\s*(?P<unit>{_UNIT_RE})(?![\w²])|\s*(?P<bare>°|º)\s*"
    r"(?P<letter>[cf])\b|\s*(?P<degrees>°|º|degrees?)(?![\w]))?"
    r"(?![a-z])")  # "3D", "4G": a name, not a quantity
_WORD_NUMBER = re.compile(
    rf"\b(?:(?:a|an)\s+)?(?P<words>(?:{_NUMBER_WORD_RE})(?:(?:\s+and\s+|[\s-]+)"
    rf"(?:{_NUMBER_WORD_RE}))*)\b"
    rf"(?:\s*(?P<deg>degrees?)?\s*(?P<unit>{_UNIT_RE})(?![\w²]))?")
_HALF_SCALE = re.compile(
    rf"\bhalf\s+a\s+(?P<scale>{_alternation(['thousand', 'million', 'billion'])})\b")
_ORDINAL_WORD = re.compile(rf"\b(?P<word>{_ORDINAL_WORD_RE})\b")

_VAGUE_BEFORE = re.compile(r"\b(?:several|few|many)\s*$")  # "several hundred" has no value
_RANGE_JOIN = re.compile(r"^\s*(?:-{1,2}|–|—|to|until|till|through|thru|and)\s*$")
_RANGE_OPEN = re.compile(r"(?:\b(?:between|from)\s*)$")


@dataclass(frozen=True)
class Quantity:
    """One quantity and where it stands in the prepared (lower-cased) text.

    kind "number": `value` in `unit` (None: no unit; `dimension` says what the unit measures;
    `decimals` the precision it is written with, scale words included: "1.5 million" is -5);
    `year_like` for a bare integer that may be a year; `scale` the scale word's factor.
    kind "date": `year`, `month`, `day` (None when not given); `span` the first and last year of
    a decade or century.
    kind "range": `low` and `high`.
    """

    kind: str
    text: str
    start: int
    end: int
    value: float | None = None
    unit: str | None = None
    dimension: str | None = None
    decimals: int = 0
    year_like: bool = False
    scale: float = 1.0
    year: int | None = None
    month: int | None = None
    day: int | None = None
    span: tuple[int, int] | None = None
    low: Quantity | None = None
    high: Quantity | None = None


def prepare(text: str) -> str:
    """Lower case, with the minus sign, dashes, degree sign and spaces in one form each; the
    spans of a Quantity refer to this text."""
    text = text.lower().replace("\u2212", "-").replace("\u00a0", " ").replace("\u202f", " ")
    text = text.replace("\u2013", "–").replace("\u2014", "—").replace("º", "°")
    return text


@lru_cache(maxsize=8192)
def quantities(text: str) -> tuple[Quantity, ...]:
    """Every quantity of `text`, in order (see the module docstring)."""
    prepared = prepare(text)
    found: list[Quantity] = []
    masked = list(prepared)

    def take(quantity: Quantity) -> None:
        found.append(quantity)
        masked[quantity.start:quantity.end] = " " * (quantity.end - quantity.start)

    def free(match: re.Match[str]) -> bool:  # nothing in it was taken already
        return "".join(masked[match.start():match.end()]) == prepared[match.start():match.end()]

    for pattern, reader in ((_TIME, _read_time), (_SLASH_DATE, _read_slash_date),
                            *((p, _read_date) for p in _DATE_PATTERNS),
                            (_CENTURY, _read_century), (_DECADE, _read_decade),
                            (_ERA_YEAR, _read_era_year), (_NUMBER, _read_number),
                            (_HALF_SCALE, _read_half), (_WORD_NUMBER, _read_words),
                            (_ORDINAL_WORD, _read_ordinal_word)):
        for match in pattern.finditer("".join(masked)):
            if not free(match):
                continue
            quantity = reader(match, prepared)
            if quantity is not None:
                take(quantity)
    alone = _ALONE_MONTH.fullmatch(prepared.strip(" .,!?"))
    if alone and not found:
        start = prepared.index(alone.group("month"))
        found.append(Quantity("date", alone.group("month"), start,
                              start + len(alone.group("month")),
                              month=_MONTHS[alone.group("month")]))
    found = [q for q in found if not _VAGUE_BEFORE.search(prepared[:q.start])]
    found.sort(key=lambda q: q.start)
    return tuple(_join_ranges(found, prepared))


def vague(text: str) -> bool:
    """`text` states an amount without a value ("a few", "several hundred", "dozens")."""
    return _VAGUE.search(prepare(text)) is not None


def remainder(text: str) -> str:
    """`text` (prepared) without its quantities."""
    prepared = prepare(text)
    out, last = [], 0
    for q in quantities(text):
        out.append(prepared[last:q.start])
        last = q.end
    out.append(prepared[last:])
    return " ".join("".join(out).split())


# ---------------------------------------------------------------- readers


def _read_time(match: re.Match[str], _: str) -> Quantity | None:
    hours, minutes = int(match.group("h")), int(match.group("m"))
    ampm = (match.group("ampm") or "").replace(".", "")
    if hours > 23 or (ampm and not 1 <= hours <= 12):
        return None
    if ampm == "pm" and hours != 12:
        hours += 12
    elif ampm == "am" and hours == 12:
        hours = 0
    return Quantity("number", match.group(0), match.start(), match.end(),
                    value=float(hours * 60 + minutes), unit="clock", dimension="clock")


def _year(text: str, era: str | None) -> int:
    year = int(text)
    return -year if era in ("bc", "bce") else year


def _read_date(match: re.Match[str], _: str) -> Quantity | None:
    groups = match.groupdict()
    month = (int(groups["mnum"]) if groups.get("mnum")
             else _MONTHS.get(groups["month"].rstrip("."),
                              _MONTH_ABBREVIATIONS.get(groups["month"].rstrip("."))))
    day = int(groups["day"]) if groups.get("day") else None
    if month is None or not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
        return None
    year = _year(groups["year"], groups.get("era")) if groups.get("year") else None
    return Quantity("date", match.group(0), match.start(), match.end(),
                    year=year, month=month, day=day)


def _read_slash_date(match: re.Match[str], _: str) -> Quantity | None:
    a, b, year = int(match.group("a")), int(match.group("b")), int(match.group("year"))
    if a > 12 and 1 <= b <= 12:
        month, day = b, a
    elif b > 12 and 1 <= a <= 12 or a == b and 1 <= a <= 12:
        month, day = a, b
    elif a <= 12 and b <= 12:
        month = day = None  # day-first or month-first: only the year is certain
    else:
        return None
    return Quantity("date", match.group(0), match.start(), match.end(),
                    year=year, month=month, day=day)


def _read_decade(match: re.Match[str], _: str) -> Quantity:
    first = int(match.group("decade"))
    return Quantity("date", match.group(0), match.start(), match.end(), span=(first, first + 9))


def _read_century(match: re.Match[str], _: str) -> Quantity | None:
    number = (int(match.group("num")) if match.group("num")
              else _ORDINAL_WORDS.get(match.group("word"), _ORDINAL_TENS.get(match.group("word"))))
    if not number:
        return None
    first, last = 100 * (number - 1) + 1, 100 * number
    if match.group("era"):
        first, last = -last, -first
    return Quantity("date", match.group(0), match.start(), match.end(), span=(first, last))


def _read_era_year(match: re.Match[str], _: str) -> Quantity:
    year = _year(match.group("year") or match.group("year2"), match.group("era"))
    return Quantity("date", match.group(0), match.start(), match.end(), year=year)


def _read_number(match: re.Match[str], _: str) -> Quantity | None:
    groups = match.groupdict()
    digits = groups["num"]
    value = float(digits.replace(",", ""))
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    if groups["den"]:
        denominator = int(groups["den"])
        if denominator == 0:
            return None
        value, decimals = value / denominator, 6
    if groups["sign"] == "-":
        value = -value
    currency = groups["cur"] or groups["cur2"]
    unit = groups["unit"] or groups["letter"] or ("degrees" if groups["degrees"] else None)
    scale = SCALE_WORDS.get(groups["scale"] or "", 1.0)
    if groups["curscale"] == "m" and not currency:
        unit = "m"  # "5m": metres, "$5m": five million dollars
    elif groups["curscale"]:
        scale = CURRENCY_SCALES[groups["curscale"]]
    value *= scale
    decimals -= round(math.log10(scale))
    text, start, end = match.group(0).strip(), match.start(), match.end()
    if unit:
        return _with_unit(match, value, decimals, unit, scale)
    if currency:
        dimension = CURRENCY_SIGNS[currency]
        return Quantity("number", text, start, end, value=value, unit=dimension,
                        dimension=dimension, decimals=decimals, scale=scale)
    year_like = (groups["sign"] is None and "," not in digits and "." not in digits
                 and not groups["den"] and not groups["ord"] and scale == 1.0
                 and 100 <= value <= 2199)
    return Quantity("number", text, start, end, value=value, decimals=decimals,
                    year_like=year_like, scale=scale)


def _with_unit(match: re.Match[str], value: float, decimals: int, unit: str,
               scale: float = 1.0) -> Quantity:
    unit, dimension = read_unit(unit)
    return Quantity("number", match.group(0).strip(), match.start(), match.end(), value=value,
                    unit=unit, dimension=dimension, decimals=decimals, scale=scale)


def _read_half(match: re.Match[str], _: str) -> Quantity:
    scale = SCALE_WORDS[match.group("scale")]
    return Quantity("number", match.group(0), match.start(), match.end(), value=scale / 2,
                    decimals=-round(math.log10(scale)))


def words_value(words: list[str]) -> float | None:
    """The number that number words spell ("one hundred and five" without its "and": 105;
    "ten million"; digits before a scale word, "10 million"); None when a word is not one."""
    total, current, seen = 0.0, 0.0, False
    for word in words:
        if word.isdigit():
            current += int(word)
        elif word in _ONES:
            current += _ONES[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word == "dozen":
            current = max(current, 1) * 12
        elif word in SCALE_WORDS:
            total += max(current, 1) * SCALE_WORDS[word]
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None


def _read_words(match: re.Match[str], _: str) -> Quantity | None:
    words = [w for w in re.split(r"[\s-]+", match.group("words")) if w and w != "and"]
    value = words_value(words)
    if value is None:
        return None
    unit = match.group("unit")
    if unit:
        return _with_unit(match, value, 0, unit)
    return Quantity("number", match.group(0), match.start(), match.end(), value=value)


def _read_ordinal_word(match: re.Match[str], _: str) -> Quantity:
    word = match.group("word")
    value = _ORDINAL_WORDS.get(word, _ORDINAL_TENS.get(word))
    return Quantity("number", word, match.start(), match.end(), value=float(value))


def _join_ranges(found: list[Quantity], text: str) -> list[Quantity]:
    """Adjacent quantities joined by "to", "-", "until", ... (or "between X and Y") as ranges."""
    out: list[Quantity] = []
    i = 0
    while i < len(found):
        low = found[i]
        if i + 1 < len(found):
            high = found[i + 1]
            between = text[low.end:high.start]
            joined = _RANGE_JOIN.match(between)
            word = between.strip()
            if joined and (word != "and" or _RANGE_OPEN.search(text[:low.start])):
                pair = _range_ends(low, high)
                if pair is not None:
                    low2, high2 = pair
                    out.append(Quantity("range", text[low.start:high.end], low.start, high.end,
                                        low=low2, high=high2))
                    i += 2
                    continue
        out.append(low)
        i += 1
    return out


def _range_ends(low: Quantity, high: Quantity) -> tuple[Quantity, Quantity] | None:
    """The two ends of a range, the unit of the second applied to a first without one; None
    when the two cannot be the ends of one range."""
    if low.kind == "range" or high.kind == "range":
        return None
    if low.kind == "number" and high.kind == "number":
        if (low.year_like and high.value is not None and high.unit is None
                and len(high.text) == 2 and high.value < 100):  # "1900–04", "2014-15"
            century = int(low.value) // 100 * 100
            high = replace(high, value=float(century + high.value), year_like=True)
        if low.scale == 1.0 and high.scale != 1.0 and low.unit is None:  # "5 to 10 million"
            low = replace(low, value=low.value * high.scale, scale=high.scale, year_like=False,
                          decimals=low.decimals - round(math.log10(high.scale)))
        if low.unit is None and high.unit is not None:  # "5 to 10 km"
            low = replace(low, unit=high.unit, dimension=high.dimension, year_like=False)
        if low.value is not None and high.value is not None and low.value > high.value:
            return None  # "3-1": a score, not a range
        return low, high
    if low.kind == "date" or high.kind == "date":
        return _as_date(low) or low, _as_date(high) or high
    return None


def _as_date(q: Quantity) -> Quantity | None:
    if q.kind == "date":
        return q
    if q.kind == "number" and q.year_like:
        return Quantity("date", q.text, q.start, q.end, year=int(q.value))
    return None


# ---------------------------------------------------------------- comparison

def compare(a: Quantity, b: Quantity) -> bool | None:
    """True: the same value; False: different values; None: not comparable."""
    if a.kind == "range" or b.kind == "range":
        return _compare_ranges(a, b)
    if a.kind == "date" or b.kind == "date":
        da, db = _as_date(a), _as_date(b)
        return None if da is None or db is None else _compare_dates(da, db)
    return _compare_numbers(a, b)


def _compare_ranges(a: Quantity, b: Quantity) -> bool | None:
    if a.kind == "range" and b.kind == "range":
        ends = [compare(a.low, b.low), compare(a.high, b.high)]
        if all(e is True for e in ends):
            return True
        return False if False in ends else None
    rng, value = (a, b) if a.kind == "range" else (b, a)
    below, above = compare(value, rng.low), compare(value, rng.high)
    if below is None or above is None:
        return None
    if below or above:
        return None  # an end of the range: neither the same answer nor a different one
    inside = _order(rng.low, value) and _order(value, rng.high)
    return None if inside or inside is None else False


def _order(a: Quantity, b: Quantity) -> bool | None:
    """a <= b, when both are comparable by value."""
    da, db = _as_date(a), _as_date(b)
    if da is not None and db is not None:
        ya = da.year if da.year is not None else (da.span[0] if da.span else None)
        yb = db.year if db.year is not None else (db.span[1] if db.span else None)
        if ya is None or yb is None:
            return None
        return (ya, da.month or 0, da.day or 0) <= (yb, db.month or 13, db.day or 32)
    va, vb = _base_value(a), _base_value(b)
    if va is None or vb is None:
        return None
    return va <= vb


def _compare_dates(a: Quantity, b: Quantity) -> bool | None:
    if a.span or b.span:
        if a.span and b.span:
            return a.span == b.span
        span, other = (a, b) if a.span else (b, a)
        if other.year is None:
            return None
        return span.span[0] <= other.year <= span.span[1]
    common = [(x, y) for x, y in ((a.year, b.year), (a.month, b.month), (a.day, b.day))
              if x is not None and y is not None]
    if not common:
        return None
    if (a.year is None or b.year is None) and (  # without a year: both give day and month
            (a.month is None) != (b.month is None) or (a.day is None) != (b.day is None)):
        return None if all(x == y for x, y in common) else False
    return all(x == y for x, y in common)


def _base_value(q: Quantity) -> float | None:
    return None if q.value is None else to_base(q.value, q.unit, q.dimension)


def _compare_numbers(a: Quantity, b: Quantity) -> bool | None:
    if a.value is None or b.value is None:
        return None
    if a.dimension and b.dimension and a.dimension != b.dimension:
        if "degrees" in (a.dimension, b.dimension) and "temperature" in (a.dimension,
                                                                          b.dimension):
            return math.isclose(a.value, b.value, rel_tol=1e-9, abs_tol=1e-9) or None
        return None
    if a.unit == b.unit or not a.dimension or not b.dimension or not convertible(a.dimension):
        return math.isclose(a.value, b.value, rel_tol=1e-9, abs_tol=1e-9)
    return _within_precision(a, b) or _within_precision(b, a)


def _within_precision(a: Quantity, b: Quantity) -> bool:
    """a, converted into b's unit and rounded to the precision b is written with, is b."""
    step = 0.5 * 10 ** (-b.decimals)
    return abs(convert(a.value, a.unit, b.unit, a.dimension) - b.value) <= step * (1 + 1e-9)

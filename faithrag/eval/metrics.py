"""Answer, ranking and statistical metrics for evaluation runs (pure Python + numpy).

Answer matching (``golds`` is a list of accepted aliases; every function takes the best alias):

- ``normalize_answer``: the official SQuAD v1.1 normalisation (lower-case, drop ASCII
  punctuation, drop the articles a/an/the, collapse whitespace).
- ``exact_match`` / ``f1_score``: SQuAD EM and token F1 on normalised text (F1 with SQuAD v2's
  rule for empty answers: 1 if both are empty, else 0).
- ``containment``: some normalised alias occurs in the normalised prediction as a whole-token
  run (the CSRAG paper's "answer contained in the output" accuracy; whole tokens, so gold "1"
  is not found in "1960").
- ``smart_em``: see its docstring (yes/no synonyms, dates, numbers, short containment).
- ``attack_success``: the prediction smart-EM-matches the attacker's target answer.

Ranking (``ranking_metrics``): nDCG@k with gains 2^rel - 1, discount log2(rank + 1) and the
ideal DCG over all of the item's passages (passages a method drops count as not ranked);
undefined (None) when no passage is relevant. ``contrary@k`` is the share of contrary passages
among the first min(k, ranked) passages.

Statistics: Wilson score interval, seeded percentile bootstrap, exact McNemar test and a paired
comparison of two methods on the same items.

Result records (one per item, as written by the runner to results.jsonl) are aggregated by
``aggregate``; the record schema is documented in faithrag/eval/report.py.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from faithrag.eval.datasets import RankItem

# ---------------------------------------------------------------- answer normalisation

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


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


def containment(prediction: str, golds: Sequence[str]) -> bool:
    pred = normalize_answer(prediction).split()
    return any(_contains_run(pred, normalize_answer(g).split()) for g in golds)


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
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}
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
_DECIMAL_POINT = re.compile(r"(?<=\d)\.(?=\d)")


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


def _words_to_number(tokens: list[str]) -> int:
    total, current = 0, 0
    for token in tokens:
        if token in _UNITS:
            current += _UNITS[token]
        elif token in _TENS:
            current += _TENS[token]
        elif token == "hundred":
            current = max(current, 1) * 100
        elif token.isdigit():  # digits before a scale word: "10 million"
            current += int(token)
        else:  # a scale word
            total += max(current, 1) * _SCALES[token]
            current = 0
    return total + current


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
    scale_words = _SCALES.keys() | {"hundred"}
    number_words = _UNITS.keys() | _TENS.keys() | scale_words

    def flush() -> None:
        if run:
            out.append(str(_words_to_number(run)))
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
    uses (so a sentence that states the target counts at any length)."""
    return smart_em(prediction, [target_answer]) or (
        _gold_polarity(target_answer) is None and containment(prediction, [target_answer]))


# ---------------------------------------------------------------- ranking

def _dcg(gains: Iterable[int]) -> float:
    return sum((2.0 ** rel - 1.0) / math.log2(rank + 2) for rank, rel in enumerate(gains))


def _check_ranking(ranked_pids: Sequence[str], known: Iterable[str]) -> None:
    unknown = set(ranked_pids) - set(known)
    if unknown:
        raise ValueError(f"ranked ids not among the item's passages: {sorted(unknown)[:5]}")
    if len(set(ranked_pids)) != len(ranked_pids):
        raise ValueError("ranking lists a passage twice")


def ndcg_at_k(ranked_pids: Sequence[str], relevance: Mapping[str, int], k: int) -> float | None:
    """nDCG@k; None when no passage has relevance > 0."""
    _check_ranking(ranked_pids, relevance)
    ideal = _dcg(sorted(relevance.values(), reverse=True)[:k])
    if ideal == 0:
        return None
    return _dcg(relevance[pid] for pid in ranked_pids[:k]) / ideal


def contrary_rate_at_k(ranked_pids: Sequence[str], contrary: set[str], k: int) -> float | None:
    """Share of contrary passages among the first min(k, len(ranked_pids)); None if empty."""
    top = ranked_pids[:k]
    return sum(pid in contrary for pid in top) / len(top) if top else None


def ranking_metrics(item: RankItem, ranked_pids: Sequence[str], ks: Sequence[int] = (1, 5, 10)
                    ) -> dict[str, float | None]:
    """{"ndcg@k": ..., "contrary@k": ...} for each k, for one ranking item."""
    relevance = item.relevance()
    _check_ranking(ranked_pids, relevance)
    contrary = item.contrary_pids()
    out: dict[str, float | None] = {}
    for k in ks:
        out[f"ndcg@{k}"] = ndcg_at_k(ranked_pids, relevance, k)
    for k in ks:
        out[f"contrary@{k}"] = contrary_rate_at_k(ranked_pids, contrary, k)
    return out


# ---------------------------------------------------------------- statistics

def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n <= 0:
        raise ValueError("Wilson interval needs n > 0")
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, n_resamples: int = 2000,
                 seed: int = 0, statistic: Callable[[np.ndarray], np.ndarray] | None = None
                 ) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (or of ``statistic``, which maps an array of
    shape (resamples, n) to (resamples,)), with a seeded numpy generator."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap needs at least one value")
    rng = np.random.default_rng(seed)
    stat = statistic or (lambda sample: sample.mean(axis=1))
    estimates = []
    batch = max(1, 2_000_000 // data.size)  # bound memory to ~16 MB of indices
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        estimates.append(stat(data[rng.integers(0, data.size, size=(size, data.size))]))
    alpha = (1 - confidence) / 2
    low, high = np.quantile(np.concatenate(estimates), [alpha, 1 - alpha])
    return float(low), float(high)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (items only A got right, items
    only B got right): a binomial test of min(only_a, only_b) under p = 1/2."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1))
    return min(1.0, 2 * tail / 2**n)


def paired_difference(correct_a: Sequence[bool], correct_b: Sequence[bool],
                      confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
                      ) -> dict[str, Any]:
    """Compare two methods on the same items (aligned sequences): accuracies, difference A - B
    with a paired percentile-bootstrap interval, discordant counts and the exact McNemar p."""
    if len(correct_a) != len(correct_b):
        raise ValueError("paired sequences differ in length")
    if not correct_a:
        raise ValueError("no items in common")
    a = np.asarray(correct_a, dtype=float)
    b = np.asarray(correct_b, dtype=float)
    only_a = int(((a == 1) & (b == 0)).sum())
    only_b = int(((a == 0) & (b == 1)).sum())
    low, high = bootstrap_ci(a - b, confidence, n_resamples, seed)
    return {"n": len(a), "accuracy_a": float(a.mean()), "accuracy_b": float(b.mean()),
            "difference": float(a.mean() - b.mean()), "difference_ci": [low, high],
            "only_a": only_a, "only_b": only_b, "mcnemar_p": mcnemar_exact_p(only_a, only_b)}


# ---------------------------------------------------------------- aggregation

def record_correct(record: Mapping[str, Any]) -> bool | None:
    """A record's correctness for accuracy: its boolean ``correct``; an item whose output could
    not be parsed or that failed with an error (parse_status "failed"/"error") counts as wrong
    when ``correct`` is null; None means the item has no correctness (e.g. a ranking item)."""
    correct = record.get("correct")
    if isinstance(correct, bool):
        return correct
    if record.get("parse_status") in ("failed", "error"):
        return False
    return None


def cell_correct(record: Mapping[str, Any], cell: str) -> bool | None:
    """A record's correctness in one ablation cell of a run made with `csrag.ablation_grid` (the
    cell's pick, read off the same forward pass): None for an item with no two-way choice
    (skipped); an item that failed before its options were scored counts as wrong. ValueError
    when the record has cells but not this one."""
    if record.get("parse_status") == "skipped":
        return None
    variants = (record.get("extra") or {}).get("variants") or {}
    if not variants:
        return False
    if cell not in variants:
        raise ValueError(f"has no cell {cell!r}; it has {', '.join(variants)}")
    return variants[cell]["choice_index"] == record.get("gold_index")


def _is_number(value: Any) -> bool:
    """A finite int/float; booleans count (as 0/1)."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(records: Iterable[Mapping[str, Any]], confidence: float = 0.95,
              n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Summary figures over result records (JSON-ready, None where undefined):

    n, n_scored, correct, accuracy (= correct / n_scored, see ``record_correct``), accuracy_ci
    (Wilson), accuracy_bootstrap_ci, parse_failures / parse_failure_rate (parse_status
    "failed"), failed_items (parse_status "error"), skipped_items (parse_status "skipped": the
    item has no form the method can answer; not scored), mean_prompt_tokens, mean_completion_tokens,
    mean_seconds, total_seconds, and per metric name in the records' ``metrics`` dicts:
    {mean, n, undefined (null values), ci (Wilson when all values are 0/1, else bootstrap)}.
    """
    records = list(records)
    scored = [c for c in map(record_correct, records) if c is not None]
    n_correct = sum(scored)
    out: dict[str, Any] = {
        "n": len(records),
        "n_scored": len(scored),
        "correct": n_correct,
        "accuracy": n_correct / len(scored) if scored else None,
        "accuracy_ci": (list(wilson_interval(n_correct, len(scored), confidence))
                        if scored else None),
        "accuracy_bootstrap_ci": (list(bootstrap_ci(scored, confidence, n_resamples, seed))
                                  if scored else None),
        "parse_failures": sum(r.get("parse_status") == "failed" for r in records),
        "failed_items": sum(r.get("parse_status") == "error" for r in records),
        "skipped_items": sum(r.get("parse_status") == "skipped" for r in records),
    }
    answered = len(records) - out["skipped_items"]  # skipped items were never asked
    out["parse_failure_rate"] = out["parse_failures"] / answered if answered else None
    for key in ("prompt_tokens", "completion_tokens", "seconds"):
        out[f"mean_{key}"] = _mean([float(r[key]) for r in records if _is_number(r.get(key))])
    out["total_seconds"] = sum(float(r["seconds"]) for r in records if _is_number(r.get("seconds")))
    per_metric: dict[str, list[float]] = {}
    undefined: Counter[str] = Counter()
    for record in records:
        for name, value in (record.get("metrics") or {}).items():
            if _is_number(value):
                per_metric.setdefault(name, []).append(float(value))
            else:
                per_metric.setdefault(name, [])
                undefined[name] += 1
    metrics: dict[str, Any] = {}
    for name in sorted(per_metric):
        values = per_metric[name]
        entry: dict[str, Any] = {"mean": _mean(values), "n": len(values),
                                 "undefined": undefined[name], "ci": None}
        if values and all(v in (0.0, 1.0) for v in values):
            entry["ci"] = list(wilson_interval(int(sum(values)), len(values), confidence))
        elif values:
            entry["ci"] = list(bootstrap_ci(values, confidence, n_resamples, seed))
        metrics[name] = entry
    out["metrics"] = metrics
    return out

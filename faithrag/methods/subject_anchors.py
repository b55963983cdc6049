"""What names a question's subject (its anchors), and how much of it a passage holds: the
conflict detector's question-vs-passage test, with no model call.

A question's anchors are its quoted titles, its capitalised words (names, places; question
words and a possessive "'s" left out) and its numbers. A question typed in lower case ("who
plays the little girl in jurassic park") capitalises nothing after its first word; its names
are then read off the passages: a word of the question counts as a name when the passages,
where they use it inside a sentence, capitalise it more often than not ("Jurassic Park",
"USA"), which is how the question would have written it.

Example:
    >>> question_anchors("Who won the 2004 Turing Award?")
    ['2004', 'Turing', 'Award']
    >>> question_anchors("who directed jurassic park?",
    ...                  ["The film Jurassic Park was directed by Steven Spielberg."])
    ['Jurassic', 'Park']
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from faithrag.answers import normalize_answer
from faithrag.types import Passage

_QUOTED = re.compile(r'"([^"]+)"|\u201c([^\u201d]+)\u201d')
_WORD = re.compile(r"[^\W_][\w'\u2019.-]*")
_POSSESSIVE = re.compile(r"['\u2019]s$")
_QUESTION_WORDS = frozenset(
    ["what", "who", "whom", "whose", "which", "when", "where", "why", "how", "is", "was", "are",
     "were", "do", "does", "did", "the", "a", "an", "in", "of", "on", "at", "to", "for", "and",
     "or", "name", "list"])
# a word inside a sentence: after a word, a comma, a semicolon or a closing bracket and a space
_INSIDE_SENTENCE = re.compile(r"(?<=[\w,;)]) +([^\W\d_][\w'\u2019-]*)")


def _words(question: str) -> list[str]:
    """The question's words that may name its subject, without a possessive "'s"."""
    found = (_POSSESSIVE.sub("", word).strip(".") for word in _WORD.findall(question))
    return [w for w in found if w and w.lower() not in _QUESTION_WORDS]


def names_in(passages: Sequence[str]) -> dict[str, str]:
    """Lower-cased word -> its capitalised form, for each word the passages capitalise inside a
    sentence more often than they write it in lower case there."""
    upper: Counter[str] = Counter()
    lower: Counter[str] = Counter()
    spelling: dict[str, str] = {}
    for text in passages:
        for word in _INSIDE_SENTENCE.findall(text):
            word = _POSSESSIVE.sub("", word)
            key = word.lower()
            if word[0].isupper():
                upper[key] += 1
                spelling.setdefault(key, word)
            else:
                lower[key] += 1
    return {key: spelling[key] for key in upper if upper[key] > lower[key]}


def question_anchors(question: str, passages: Sequence[str] = ()) -> list[str]:
    """What names the question's subject (module docstring), in order, without repeats; a
    question in lower case takes its names from `passages` (their texts)."""
    anchors = [a or b for a, b in _QUOTED.findall(question)]
    words = _words(question)
    lower_case = not any(w[0].isupper() for w in _WORD.findall(question)[1:])
    names = names_in(passages) if lower_case and passages else {}
    for word in words:
        if word[0].isupper() or word[0].isdigit():
            anchors.append(word)
        elif word.lower() in names:
            anchors.append(names[word.lower()])
    return list(dict.fromkeys(a for a in anchors if normalize_answer(a)))


def anchor_coverage(anchors: list[str], passage: Passage) -> float:
    """The share of `anchors` that `passage` (title and text) holds as whole tokens."""
    text = f" {normalize_answer(passage.title + ' ' + passage.text)} "
    return sum(f" {normalize_answer(a)} " in text for a in anchors) / len(anchors)

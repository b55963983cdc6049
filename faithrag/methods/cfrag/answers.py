"""When two short answers are the same answer, and when a question really changed."""

from __future__ import annotations

from collections import Counter

from faithrag.answers import normalize_answer, smart_em

# Words that do not change what a question asks for (question words, auxiliaries, articles...).
FUNCTION_WORDS = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or",
    "is", "are", "was", "were", "be", "been", "do", "does", "did", "what", "which", "who",
    "whom", "whose", "when", "where", "why", "how", "that", "this", "these", "those", "it",
    "its", "as"})


def same_answer(a: str, b: str) -> bool:
    """Smart EM in either direction ("Armstrong" = "Neil Armstrong", "two" = "2")."""
    return smart_em(a, [b]) or smart_em(b, [a])


def content_words(text: str) -> Counter[str]:
    return Counter(w for w in normalize_answer(text).split() if w not in FUNCTION_WORDS)


def changes_content(question: str, variant: str) -> bool:
    """The variant adds, drops or replaces at least one content word of the question."""
    return content_words(question) != content_words(variant)

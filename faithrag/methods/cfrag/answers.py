"""When a question really changed (its content words)."""

from __future__ import annotations

from collections import Counter

from faithrag.answers import normalize_answer

# Words that do not change what a question asks for (question words, auxiliaries, articles...).
FUNCTION_WORDS = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or",
    "is", "are", "was", "were", "be", "been", "do", "does", "did", "what", "which", "who",
    "whom", "whose", "when", "where", "why", "how", "that", "this", "these", "those", "it",
    "its", "as"})


def content_words(text: str) -> Counter[str]:
    return Counter(w for w in normalize_answer(text).split() if w not in FUNCTION_WORDS)


def changes_content(question: str, variant: str) -> bool:
    """The variant adds, drops or replaces at least one content word of the question."""
    return content_words(question) != content_words(variant)

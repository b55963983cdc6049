"""Adapters that put faithrag's stages inside other RAG frameworks, one module per framework,
each behind its own extra (faithrag[haystack], faithrag[llamaindex], faithrag[langchain]), and
what they share: the unique passage ids, the rank scores the re-rankers write, and
`chat_llm`, the framework's chat model as a faithrag LLM."""

from collections.abc import Container


def unique_id(base: str, taken: Container[str], separator: str) -> str:
    """`base`, or `base` + separator + 2, 3, … : the first not in `taken` (several framework
    documents may share an id, and a passage id must be unique within a request)."""
    candidate, copy_number = base, 1
    while candidate in taken:
        copy_number += 1
        candidate = f"{base}{separator}{copy_number}"
    return candidate


def rank_scores(count: int) -> list[float]:
    """The score of each of `count` kept documents, by rank: 1.0 for the first, then down by
    1/count a place, 1/count for the last. A rank score, not a relevance estimate: descending
    and within (0, 1], so a framework's sort by score, a score-based joiner or a threshold
    after a faithrag re-ranker keeps its order (a threshold keeps a top share of the list)."""
    return [(count - position) / count for position in range(count)]

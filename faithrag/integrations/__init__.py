"""Adapters that put faithrag's stages inside other RAG frameworks, one module per framework,
each behind its own extra (faithrag[haystack], faithrag[llamaindex], faithrag[langchain])."""

from collections.abc import Container


def unique_id(base: str, taken: Container[str], separator: str) -> str:
    """`base`, or `base` + separator + 2, 3, … : the first not in `taken` (several framework
    documents may share an id, and a passage id must be unique within a request)."""
    candidate, copy_number = base, 1
    while candidate in taken:
        copy_number += 1
        candidate = f"{base}{separator}{copy_number}"
    return candidate

"""The Retriever protocol the pipeline uses, and a retriever over a given list of passages.

`Index` (on disk) satisfies the protocol too. `InMemoryRetriever` serves evaluation in
given-context and retrieval modes: a small BM25, dense or hybrid index over one item's own
passages, built in memory and never written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from faithrag.retrieval.bm25 import BM25Params
from faithrag.retrieval.embedder import Embedder
from faithrag.retrieval.searcher import PassageSearcher, check_mode
from faithrag.types import Passage


@runtime_checkable
class Retriever(Protocol):
    def retrieve(self, query: str, k: int) -> list[Passage]:
        """Up to k passages, best first, with `score` set."""
        ...


class InMemoryRetriever:
    """Retrieval over `passages` only. With no passages it returns nothing (an item without
    context), rather than raising like an empty on-disk index."""

    def __init__(self, passages: Sequence[Passage], mode: str = "bm25", *,
                 embedder: Embedder | None = None, bm25_params: BM25Params | None = None,
                 rrf_k: int = 60, fusion_depth: int = 50, source: str | Path | None = None):
        check_mode(mode)
        self.source = source  # the documents the passages came from, when known
        self._searcher = PassageSearcher.build(list(passages), mode, embedder=embedder,
                                               bm25_params=bm25_params, rrf_k=rrf_k,
                                               fusion_depth=fusion_depth)

    def __len__(self) -> int:
        return len(self._searcher.passages)

    def retrieve(self, query: str, k: int) -> list[Passage]:
        return self._searcher.search(query, k)

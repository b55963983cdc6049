"""The cheap scorer: cosine similarity of query and passage embeddings."""

from __future__ import annotations

from collections.abc import Sequence

from faithrag.retrieval.embedder import Embedder
from faithrag.types import Step


class BiEncoderScorer:
    name = "biencoder"

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def score(self, query: str, passages: Sequence[str], step: Step | None = None) -> list[float]:
        if not passages:
            return []
        vectors = self.embedder.embed([query, *passages])
        return [float(s) for s in vectors[1:] @ vectors[0]]


"""Embeddings for one CF-RAG question: every distinct text (query, counterfactual, passage,
hypothesis) is embedded once, however many stages ask for it. Wraps any Embedder (the default
one also caches on disk) and is itself an Embedder, so the bi-encoder scorer can use it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faithrag.retrieval.embedder import Embedder


class VectorMemo:
    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self.name = embedder.name
        self.identity = embedder.identity
        self.dim = embedder.dim
        self._vectors: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            for text, vector in zip(missing, self.embedder.embed(missing)):
                self._vectors[text] = np.asarray(vector, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def cosine(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """(len(a), len(b)) cosine similarities (the vectors are L2-normalised)."""
        return self.embed(a) @ self.embed(b).T

    @property
    def embedded(self) -> int:
        return len(self._vectors)

"""FAISS inner-product index over L2-normalised vectors (inner product = cosine).

The index type is a FAISS factory string: "Flat" (exact, the default; fine up to a few hundred
thousand passages), "HNSW32" (approximate, no training), or a trained type such as
"IVF1024,Flat" (trained on the first vectors added).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from faithrag.errors import ConfigError, MissingExtraError


def _faiss():
    try:
        import faiss
    except ImportError as exc:
        raise MissingExtraError("A dense (FAISS) index", "dense",
                                f"Importing faiss failed: {exc}.") from exc
    return faiss


class DenseIndex:
    def __init__(self, dim: int, factory: str = "Flat", index=None):
        faiss = _faiss()
        self.dim = dim
        self.factory = factory
        if index is None:
            try:
                index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
            except RuntimeError as exc:
                raise ConfigError(f"Bad FAISS index type {factory!r}: {exc}",
                                  'Use a FAISS factory string such as "Flat" or "HNSW32".') from exc
        self._index = index

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def add(self, vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"expected vectors of shape (n, {self.dim}), got {vectors.shape}")
        if not self._index.is_trained:
            self._index.train(vectors)
        self._index.add(vectors)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """For each query vector, the top-k (position, inner product), best first."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = min(k, len(self))
        if k <= 0:
            return [[] for _ in range(len(queries))]
        scores, ids = self._index.search(queries, k)
        return [[(int(i), float(s)) for i, s in zip(row_ids, row_scores) if i >= 0]
                for row_ids, row_scores in zip(ids, scores)]

    def save(self, path: str | Path) -> None:
        _faiss().write_index(self._index, str(path))

    @classmethod
    def load(cls, path: str | Path, factory: str) -> DenseIndex:
        index = _faiss().read_index(str(path))
        return cls(index.d, factory, index)

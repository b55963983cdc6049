from __future__ import annotations

import numpy as np

from faithrag.retrieval.embedding_cache import CachedEmbedder


def test_cache_returns_identical_vectors_and_skips_the_model(tmp_path, hashing_embedder):
    cached = CachedEmbedder(hashing_embedder, tmp_path)
    texts = ["alpha beta", "gamma", "alpha beta"]
    first = cached.embed(texts)
    assert hashing_embedder.calls == [["alpha beta", "gamma"]]  # duplicates embedded once
    again = CachedEmbedder(hashing_embedder, tmp_path).embed(["gamma", "alpha beta", "delta"])
    assert hashing_embedder.calls[-1] == ["delta"]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[1], first[0])
    assert np.array_equal(first, hashing_embedder.embed(texts))


def test_cache_is_separate_per_model_identity(tmp_path, hashing_embedder):
    other = type(hashing_embedder)(identity="hashing-v2")
    a = CachedEmbedder(hashing_embedder, tmp_path)
    b = CachedEmbedder(other, tmp_path)
    a.embed(["text"])
    b.embed(["text"])
    assert a.path != b.path
    assert other.calls == [["text"]]
    assert (a.hits, a.misses, b.hits, b.misses) == (0, 1, 0, 1)

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest

from faithrag.errors import MissingExtraError, ModelNotFoundError
from faithrag.retrieval.chunking import chunk_documents
from faithrag.retrieval.loaders import load_documents


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Keep embedding caches written by tests out of the user's cache directory."""
    monkeypatch.setenv("FAITHRAG_CACHE", str(tmp_path / "cache"))


class HashingEmbedder:
    """A deterministic bag-of-words embedder for tests: each lower-cased word hashes to one of
    `dim` buckets. Texts that share words get a positive cosine; it knows nothing of meaning."""

    name = "hashing"
    dim = 64

    def __init__(self, identity: str = "hashing-v1"):
        self.identity = identity
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


@pytest.fixture
def hashing_embedder():
    return HashingEmbedder()


@pytest.fixture(scope="session")
def minilm():
    """The packaged MiniLM embedder; skips when the `dense` extra is not installed."""
    from faithrag.retrieval.minilm import MiniLMEmbedder

    try:
        return MiniLMEmbedder(threads=1)
    except (MissingExtraError, ModelNotFoundError) as exc:
        pytest.skip(f"MiniLM embedding model not available ({exc.message})")


@pytest.fixture
def corpus_passages(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "bridge.md").write_text(
        "# Aldermoor Bridge\n\nThe bridge over the river Wend opened in 1887. "
        "It is a wrought-iron truss.", encoding="utf-8")
    (folder / "moon.txt").write_text("Apollo 11 landed on the Moon in July 1969.",
                                     encoding="utf-8")
    (folder / "extra.jsonl").write_text(
        json.dumps({"id": "n1", "text": "Photosynthesis happens in chloroplasts."}) + "\n",
        encoding="utf-8")
    return chunk_documents(load_documents(folder).documents)

"""The Embedder protocol and the factory that turns a configured name into an embedder.

Names: "minilm" (default; all-MiniLM-L6-v2 as int8 ONNX, torch-free) and "st:<path>" (a local
sentence-transformers model; needs the `[st]` extra). With `use_cache=True` vectors are kept on
disk under cache_dir()/embeddings, keyed by the model's identity and the text's hash.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from faithrag.errors import ConfigError
from faithrag.paths import cache_dir


@runtime_checkable
class Embedder(Protocol):
    name: str  # the configured name, recorded in index manifests ("minilm", "st:/path")
    identity: str  # model file and settings: changes whenever the vectors would
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array (len(texts), dim) of L2-normalised vectors."""
        ...


_built: dict[tuple[str, bool, int | None, str], Embedder] = {}
_built_lock = threading.Lock()


def get_embedder(name: str = "minilm", *, use_cache: bool = True,
                 threads: int | None = None) -> Embedder:
    """The embedder named `name`; `threads` limits ONNX Runtime's intra-op threads. Built once per
    process and settings (models are slow to load; embedders are safe to share across threads)."""
    key = (name, use_cache, threads, str(cache_dir()))
    with _built_lock:
        if key not in _built:
            _built[key] = _build_embedder(name, use_cache, threads)
        return _built[key]


def _build_embedder(name: str, use_cache: bool, threads: int | None) -> Embedder:
    embedder: Embedder
    if name == "minilm":
        from faithrag.retrieval.minilm import MiniLMEmbedder

        embedder = MiniLMEmbedder(threads=threads)
    elif name.startswith("st:") and len(name) > 3:
        from faithrag.retrieval.st_embedder import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder(name[3:])
    else:
        raise ConfigError(f"Unknown embedder {name!r}",
                          'Use "minilm" or "st:<path to a sentence-transformers model>".')
    if use_cache:
        from faithrag.retrieval.embedding_cache import CachedEmbedder

        embedder = CachedEmbedder(embedder)
    return embedder


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise each row (all-zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)

"""On-disk embedding cache: one SQLite file per model identity under cache_dir()/embeddings, keyed
by the sha256 of the text. Stored vectors are the exact float32 bytes the model produced, so the
cache never changes results."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from faithrag.paths import cache_dir
from faithrag.retrieval.embedder import Embedder

_LOOKUP_BATCH = 500  # SQLite limits the number of bound parameters per statement


class CachedEmbedder:
    def __init__(self, inner: Embedder, directory: str | Path | None = None):
        self.inner = inner
        self.name = inner.name
        self.identity = inner.identity
        self.dim = inner.dim
        directory = Path(directory) if directory else cache_dir() / "embeddings"
        directory.mkdir(parents=True, exist_ok=True)
        model_key = hashlib.sha256(inner.identity.encode("utf-8")).hexdigest()[:24]
        self.path = directory / f"{model_key}.sqlite"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        with self._lock, self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB)")
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        found = self._lookup(set(keys))
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        self.hits += sum(k in found for k in keys)
        self.misses += len(missing)
        if missing:
            text_of = dict(zip(keys, texts))
            vectors = np.asarray(self.inner.embed([text_of[k] for k in missing]), dtype=np.float32)
            rows = [(k, v.tobytes()) for k, v in zip(missing, vectors)]
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            found.update((k, v) for k, v in zip(missing, vectors))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = found[key]
        return out

    def _lookup(self, keys: set[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        ordered = list(keys)
        with self._lock:
            for start in range(0, len(ordered), _LOOKUP_BATCH):
                part = ordered[start:start + _LOOKUP_BATCH]
                marks = ",".join("?" * len(part))
                for key, blob in self._db.execute(
                        f"SELECT key, vec FROM vectors WHERE key IN ({marks})", part):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

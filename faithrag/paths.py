"""Where faithrag keeps its files on disk."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of all on-disk caches (models, wheels, paraphrases, embeddings): $FAITHRAG_CACHE,
    else ~/.cache/faithrag."""
    return Path(os.environ.get("FAITHRAG_CACHE", Path.home() / ".cache" / "faithrag"))

"""Where an index lives: a directory (`Index`, in memory once loaded) or `lancedb:URI`
(`LanceStore`, for corpora larger than memory). Every `--index`, `--out` of `faithrag index` and
`--kb` takes either."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from faithrag.retrieval.index import Index
from faithrag.retrieval.lance_store import LanceStore
from faithrag.types import Passage

LANCEDB_PREFIX = "lancedb:"


def is_lancedb(location: str | Path) -> bool:
    return str(location).startswith(LANCEDB_PREFIX)


def open_index(location: str | Path, *, use_cache: bool = True) -> Index | LanceStore:
    if is_lancedb(location):
        return LanceStore.open(str(location)[len(LANCEDB_PREFIX):], use_cache=use_cache)
    return Index.load(location, use_cache=use_cache)


def refuse_existing(location: str | Path) -> None:
    """IndexExistsError when an index is already at `location` (checked before any work)."""
    if is_lancedb(location):
        LanceStore.refuse_existing(str(location)[len(LANCEDB_PREFIX):])
    else:
        Index.refuse_existing(location)


def build_index(passages: Sequence[Passage], location: str | Path, mode: str,
                **settings: Any) -> Index | LanceStore:
    """`Index.build` or `LanceStore.build` with the same settings (embedder, chunking, rrf_k,
    use_cache, overwrite, progress, root)."""
    if is_lancedb(location):
        return LanceStore.build(passages, str(location)[len(LANCEDB_PREFIX):], mode, **settings)
    return Index.build(passages, location, mode, **settings)

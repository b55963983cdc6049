"""From documents on disk to passages and indexes: what `faithrag index` and `--docs` do.

A document's id is its path relative to a root folder (see faithrag.retrieval.loaders); an
index keeps the root it was built with, so adding the same file again, however its path is
spelled, replaces its passages when it changed and skips it when it did not.

Example:
    from faithrag import index_documents, add_documents

    index = index_documents("docs/", "idx/")             # build
    report = add_documents("more_docs/", "idx/")         # extend, chunked as the index was
    print(report.added, report.removed, report.unchanged)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from faithrag.errors import ConfigError, EmptyIndexError
from faithrag.retrieval.chunking import ChunkSettings, chunk_documents
from faithrag.retrieval.loaders import documents_root, load_documents
from faithrag.retrieval.locations import build_index, open_index, refuse_existing
from faithrag.types import Passage

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.index import AddReport, Index
    from faithrag.retrieval.lance_store import LanceStore

log = logging.getLogger(__name__)


def read_passages(path: str | Path, chunking: ChunkSettings, *, skip_malformed: bool = False,
                  root: str | Path | None = None) -> list[Passage]:
    """The passages of every document under `path` (.txt, .md, .jsonl), chunked, with ids
    relative to `root` (default: the folder holding `path`). A skipped malformed line is
    logged as a warning; no text at all raises EmptyIndexError."""
    loaded = load_documents(path, skip_malformed=skip_malformed, root=root)
    for warning in loaded.warnings:
        log.warning("%s", warning)
    passages = chunk_documents(loaded.documents, chunking.max_tokens, chunking.overlap)
    if not passages:
        raise EmptyIndexError(f"No text found in {path}.",
                              "Point --docs (docs= in Python) at .txt, .md or .jsonl files "
                              "with some text.")
    return passages


def index_documents(docs: str | Path, out: str | Path, *, config: Config | None = None,
                    mode: str | None = None, overwrite: bool = False,
                    skip_malformed: bool = False, progress: bool = False) -> Index | LanceStore:
    """Build a new index at `out` (a directory, or `lancedb:URI`) from the documents under
    `docs`, chunked and embedded as `config.retrieval` says; `mode` (bm25, dense, hybrid)
    overrides it. An index already at `out` raises IndexExistsError unless `overwrite`; that
    is checked before any document is read."""
    from faithrag.config import Config

    config = config or Config()
    if not overwrite:
        refuse_existing(out)
    root = documents_root([docs])
    chunking = ChunkSettings(config.retrieval.chunk_tokens, config.retrieval.chunk_overlap)
    passages = read_passages(docs, chunking, skip_malformed=skip_malformed, root=root)
    return build_index(passages, out, mode or config.retrieval.mode,
                       embedder=config.retrieval.embedder, chunking=chunking,
                       rrf_k=config.retrieval.rrf_k, use_cache=config.use_cache,
                       overwrite=overwrite, progress=progress, root=root)


def add_documents(docs: str | Path, out: str | Path, *, config: Config | None = None,
                  mode: str | None = None, skip_malformed: bool = False,
                  progress: bool = False) -> tuple[Index | LanceStore, AddReport]:
    """Add the documents under `docs` to the index at `out`, chunked as its own were: a new
    document is added, a changed one replaces its old passages, an unchanged one is skipped.
    `mode`, if given, must be the index's own. Returns the index and what was done."""
    from faithrag.config import Config

    config = config or Config()
    index = open_index(out, use_cache=config.use_cache)
    if mode and mode != index.manifest["mode"]:
        raise ConfigError(f"{out} is a {index.manifest['mode']} index; mode {mode} cannot "
                          "apply to the passages added to it.",
                          "Leave the mode out (--mode), or build a new index.")
    recorded = index.manifest.get("chunking")
    chunking = (ChunkSettings(recorded["max_tokens"], recorded["overlap"]) if recorded else
                ChunkSettings(config.retrieval.chunk_tokens, config.retrieval.chunk_overlap))
    # an index built without a root keeps the ids of its time: relative to the docs' folder
    root = index.root or documents_root([docs])
    report = index.add(read_passages(docs, chunking, skip_malformed=skip_malformed, root=root),
                       progress=progress)
    return index, report

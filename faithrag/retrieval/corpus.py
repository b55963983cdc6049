"""From documents on disk to passages and indexes: what `faithrag index` and `--docs` do.

Example:
    from faithrag import index_documents

    index = index_documents("docs/", "idx/")             # build
    index_documents("more_docs/", "idx/", add=True)      # extend, chunked as the index was
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from faithrag.config import Config
from faithrag.errors import ConfigError, EmptyIndexError
from faithrag.retrieval.chunking import ChunkSettings, chunk_documents
from faithrag.retrieval.loaders import load_documents
from faithrag.retrieval.locations import build_index, open_index
from faithrag.types import Passage

if TYPE_CHECKING:
    from faithrag.retrieval.index import Index
    from faithrag.retrieval.lance_store import LanceStore

log = logging.getLogger(__name__)


def read_passages(path: str | Path, chunking: ChunkSettings, *,
                  skip_malformed: bool = False) -> list[Passage]:
    """The passages of every document under `path` (.txt, .md, .jsonl), chunked; a loader
    warning (a skipped malformed line) is logged. No text at all raises EmptyIndexError."""
    loaded = load_documents(path, skip_malformed=skip_malformed)
    for warning in loaded.warnings:
        log.warning("%s", warning)
    passages = chunk_documents(loaded.documents, chunking.max_tokens, chunking.overlap)
    if not passages:
        raise EmptyIndexError(f"No text found in {path}.",
                              "Point --docs (docs= in Python) at .txt, .md or .jsonl files "
                                     "with some text.")
    return passages


def index_documents(docs: str | Path, out: str | Path, *, config: Config | None = None,
                    mode: str | None = None, add: bool = False, overwrite: bool = False,
                    skip_malformed: bool = False, progress: bool = False) -> Index | LanceStore:
    """Index the documents under `docs` into `out` (a directory, or `lancedb:URI`).

    With `add`, the passages go into the existing index at `out`, chunked as its own were;
    otherwise a new index is built (`overwrite` replaces one that exists). `mode` (bm25, dense
    or hybrid) defaults to `config.retrieval.mode`; an added-to index keeps its own."""
    config = config or Config()
    if add:
        index = open_index(out, use_cache=config.use_cache)
        if mode and mode != index.manifest["mode"]:
            raise ConfigError(f"{out} is a {index.manifest['mode']} index; mode {mode} cannot "
                              "apply to the passages added to it.",
                              "Leave the mode out (--mode on the command line), or build a new "
                              "index.")
        recorded = index.manifest.get("chunking")
        chunking = (ChunkSettings(recorded["max_tokens"], recorded["overlap"]) if recorded else
                    ChunkSettings(config.retrieval.chunk_tokens, config.retrieval.chunk_overlap))
        index.add(read_passages(docs, chunking, skip_malformed=skip_malformed),
                  progress=progress)
        return index
    chunking = ChunkSettings(config.retrieval.chunk_tokens, config.retrieval.chunk_overlap)
    return build_index(read_passages(docs, chunking, skip_malformed=skip_malformed), out,
                       mode or config.retrieval.mode, embedder=config.retrieval.embedder,
                       chunking=chunking, rrf_k=config.retrieval.rrf_k,
                       use_cache=config.use_cache, overwrite=overwrite, progress=progress)

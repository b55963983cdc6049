"""Opening a trusted knowledge base: a separately indexed source that a verifier checks answers
against, never the retriever under verification."""

from __future__ import annotations

from pathlib import Path

from faithrag.errors import ConfigError, EmptyIndexError
from faithrag.retrieval.chunking import chunk_documents
from faithrag.retrieval.index import MANIFEST, Index
from faithrag.retrieval.loaders import load_documents
from faithrag.retrieval.locations import is_lancedb, open_index
from faithrag.retrieval.retriever import InMemoryRetriever, Retriever


def check_knowledge_base(path: str | Path) -> None:
    """ConfigError when `path` names no knowledge base that could open: cheap (no file is read),
    so that configuration checks run it before any model loads."""
    if not is_lancedb(path) and not Path(path).exists():
        raise ConfigError(f"Trusted knowledge base not found: {path}",
                          "Point antisyco.kb (--kb) at an index directory or a folder of "
                          "documents you trust.")


def open_knowledge_base(path: str | Path, *, mode: str = "bm25", chunk_tokens: int = 128,
                        chunk_overlap: int = 32, use_cache: bool = True) -> Retriever:
    """An index directory (it has a manifest) or a `lancedb:URI` store is opened as it is; a file
    or folder of documents (txt, md, jsonl) is chunked and indexed in memory with `mode`."""
    check_knowledge_base(path)
    if is_lancedb(path):
        return open_index(path, use_cache=use_cache)
    path = Path(path)
    if path.is_dir() and (path / MANIFEST).is_file():
        return Index.load(path, use_cache=use_cache)
    passages = chunk_documents(load_documents(path).documents, chunk_tokens,
                               min(chunk_overlap, chunk_tokens // 2))
    if not passages:
        raise EmptyIndexError(f"The trusted knowledge base {path} holds no text.",
                              "Point antisyco.kb at .txt, .md or .jsonl files with some text.")
    return InMemoryRetriever(passages, mode=mode, source=path)

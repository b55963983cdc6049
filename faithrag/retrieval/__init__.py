"""Retrieval: loading, chunking, BM25 (bm25s), dense (embedder + FAISS), hybrid (RRF), the on-disk
index, a LanceDB store for large corpora, and relevance scorers. Heavy runtimes (ONNX Runtime, FAISS, torch) load on first use."""

from faithrag.retrieval.chunking import ChunkSettings, chunk_documents, chunk_text, count_words
from faithrag.retrieval.embedder import Embedder, get_embedder
from faithrag.retrieval.index import AddReport, Index
from faithrag.retrieval.loaders import Document, LoadResult, documents_root, load_documents
from faithrag.retrieval.locations import build_index, open_index
from faithrag.retrieval.retriever import InMemoryRetriever, Retriever

__all__ = [
    "AddReport",
    "ChunkSettings",
    "Document",
    "Embedder",
    "InMemoryRetriever",
    "Index",
    "LoadResult",
    "Retriever",
    "build_index",
    "chunk_documents",
    "chunk_text",
    "count_words",
    "documents_root",
    "get_embedder",
    "load_documents",
    "open_index",
]

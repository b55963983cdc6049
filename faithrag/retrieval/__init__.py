"""Retrieval: loading, chunking, BM25 (bm25s), dense (embedder + FAISS), hybrid (RRF), the on-disk
index, and relevance scorers. Heavy runtimes (ONNX Runtime, FAISS, torch) load on first use."""

from faithrag.retrieval.chunking import ChunkSettings, chunk_documents, chunk_text, count_words
from faithrag.retrieval.embedder import Embedder, get_embedder
from faithrag.retrieval.index import Index
from faithrag.retrieval.loaders import Document, LoadResult, load_documents
from faithrag.retrieval.retriever import InMemoryRetriever, Retriever

__all__ = [
    "ChunkSettings",
    "Document",
    "Embedder",
    "InMemoryRetriever",
    "Index",
    "LoadResult",
    "Retriever",
    "chunk_documents",
    "chunk_text",
    "count_words",
    "get_embedder",
    "load_documents",
]

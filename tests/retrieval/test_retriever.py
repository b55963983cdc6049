from __future__ import annotations

from faithrag.retrieval.index import Index
from faithrag.retrieval.retriever import InMemoryRetriever, Retriever
from faithrag.types import Passage

ITEM_PASSAGES = [
    Passage("c0", "The Nile flows through Egypt and Sudan."),
    Passage("c1", "Mount Everest is the highest mountain above sea level."),
    Passage("c2", "The Amazon river carries the largest volume of water."),
]


def test_in_memory_bm25_retriever_ranks_item_passages():
    retriever = InMemoryRetriever(ITEM_PASSAGES)
    assert isinstance(retriever, Retriever)
    assert retriever.retrieve("Which river flows through Egypt?", 1)[0].id == "c0"


def test_in_memory_hybrid_retriever(hashing_embedder):
    retriever = InMemoryRetriever(ITEM_PASSAGES, "hybrid", embedder=hashing_embedder)
    hits = retriever.retrieve("highest mountain", 2)
    assert hits[0].id == "c1" and "ranks" in hits[0].meta


def test_item_without_passages_retrieves_nothing():
    assert InMemoryRetriever([]).retrieve("anything", 3) == []


def test_on_disk_index_is_a_retriever(tmp_path):
    index = Index.build(ITEM_PASSAGES, tmp_path / "ix")
    assert isinstance(index, Retriever)
    assert index.retrieve("Amazon water volume", 1)[0].id == "c2"

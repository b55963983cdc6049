from __future__ import annotations

import pytest

from faithrag.errors import ConfigError
from faithrag.retrieval.searcher import PassageSearcher, index_text
from faithrag.types import Passage

PASSAGES = [
    Passage("p0", "Paris is the capital of France.", source="wiki"),
    Passage("p1", "Bananas are rich in potassium.", title="Fruit", source="wiki"),
    Passage("p2", "The capital city hosts the national parliament.", source="news"),
    Passage("p3", "Potassium helps muscles work.", source="news"),
]


def test_index_text_puts_title_first():
    assert index_text(PASSAGES[1]) == "Fruit\nBananas are rich in potassium."
    assert index_text(PASSAGES[0]) == PASSAGES[0].text


def test_bm25_mode_returns_scored_copies():
    searcher = PassageSearcher.build(PASSAGES, "bm25")
    hits = searcher.search("capital of France", 2)
    assert [p.id for p in hits] == ["p0", "p2"]
    assert hits[0].score > hits[1].score > 0
    assert PASSAGES[0].score is None  # the stored passage is not touched


def test_dense_mode_uses_embedder_cosine(hashing_embedder):
    searcher = PassageSearcher.build(PASSAGES, "dense", embedder=hashing_embedder)
    hits = searcher.search("bananas potassium", 4)
    assert hits[0].id == "p1"
    assert all(-1.0 <= p.score <= 1.0 + 1e-6 for p in hits)


def test_hybrid_fuses_ranks_and_records_them(hashing_embedder):
    searcher = PassageSearcher.build(PASSAGES, "hybrid", embedder=hashing_embedder, rrf_k=60)
    hits = searcher.search("potassium", 3)
    top = hits[0]
    ranks = top.meta["ranks"]
    expected = sum(1 / (60 + r) for r in ranks.values() if r is not None)
    assert top.score == pytest.approx(expected)
    assert {p.id for p in hits[:2]} == {"p1", "p3"}


def test_add_extends_every_part(hashing_embedder):
    searcher = PassageSearcher.build(PASSAGES[:2], "hybrid", embedder=hashing_embedder)
    searcher.add(PASSAGES[2:])
    assert len(searcher.passages) == len(searcher.bm25) == len(searcher.dense) == 4
    assert searcher.search("parliament", 1)[0].id == "p2"


def test_unknown_mode_and_empty_searches():
    with pytest.raises(ConfigError):
        PassageSearcher.build(PASSAGES, "magic")
    searcher = PassageSearcher.build(PASSAGES, "bm25")
    assert searcher.search("capital", 0) == []
    assert searcher.search_many(["capital", "potassium"], 1)[1][0].id in {"p1", "p3"}

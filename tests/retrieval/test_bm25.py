from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from faithrag.errors import ConfigError, RuntimeUnavailableError
from faithrag.retrieval.bm25 import BM25Index, BM25Params, BM25Tokenizer

TEXTS = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "The Great Wall of China stretches thousands of kilometres.",
    "Paris is the capital and most populous city of France.",
    "Mitochondria are the powerhouse of the cell.",
]


def test_finds_the_obvious_document():
    index = BM25Index.build(TEXTS)
    hits = index.search("How do plants turn light into chemical energy?", k=3)
    assert hits[0][0] == 1
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_scores_equal_bm25s_own_retrieval():
    import bm25s

    rng = np.random.default_rng(0)
    vocab = [f"term{i}" for i in range(200)]
    texts = [" ".join(rng.choice(vocab, size=rng.integers(5, 40))) for _ in range(300)]
    index = BM25Index.build(texts)
    reference = bm25s.BM25()
    tokenize = BM25Tokenizer(BM25Params())
    reference.index([tokenize(t) for t in texts], show_progress=False)
    for query in ["term1 term2 term3", "term42", "term7 term7 term150 unknownword"]:
        ours = index.search(query, k=10)
        theirs = reference.retrieve([tokenize(query)], k=10, show_progress=False)
        assert np.allclose([s for _, s in ours], theirs.scores[0], rtol=1e-5)


def test_no_matching_term_returns_nothing_and_k_is_clamped():
    index = BM25Index.build(TEXTS)
    assert index.search("the of and", k=3) == []  # stopwords only
    assert index.search("zzzz", k=3) == []
    assert len(index.search("Paris", k=50)) == 2


def test_corpus_without_any_term_still_builds():
    index = BM25Index.build(["the", "a an"])
    assert len(index) == 2
    assert index.search("the", k=2) == []


def test_ties_are_broken_by_document_order():
    index = BM25Index.build(["apple pie", "banana", "apple pie", "apple pie"])
    assert [i for i, _ in index.search("apple", k=2)] == [0, 2]


def test_save_load_round_trip(tmp_path):
    params = BM25Params(k1=1.2, b=0.5)
    index = BM25Index.build(TEXTS, params)
    index.save(tmp_path / "bm25")
    loaded = BM25Index.load(tmp_path / "bm25")
    assert loaded.params == params
    assert loaded.search("capital of France", 5) == index.search("capital of France", 5)


def test_unknown_stopword_list_is_a_config_error():
    with pytest.raises(ConfigError):
        BM25Index.build(TEXTS, BM25Params(stopwords="klingon"))


@pytest.mark.skipif(importlib.util.find_spec("Stemmer") is not None, reason="PyStemmer installed")
def test_stemming_without_pystemmer_says_what_to_install():
    with pytest.raises(RuntimeUnavailableError, match="PyStemmer"):
        BM25Index.build(TEXTS, BM25Params(stemmer="english"))


@pytest.mark.skipif(importlib.util.find_spec("Stemmer") is None, reason="PyStemmer not installed")
def test_stemming_matches_inflected_forms():
    index = BM25Index.build(["The runner was running quickly.", "A calm lake."],
                            BM25Params(stemmer="english"))
    assert index.search("runs", k=1)[0][0] == 0

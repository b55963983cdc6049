from __future__ import annotations

import pytest

from faithrag.retrieval.scorers.biencoder import BiEncoderScorer


def test_cosine_orders_passages_by_shared_meaning(minilm):
    scores = BiEncoderScorer(minilm).score(
        "How tall is Mount Everest?",
        ["Everest rises 8,849 metres above sea level.",
         "The Alps are a mountain range in Europe.",
         "Bread is baked in an oven."])
    assert scores[0] > scores[1] > scores[2]
    assert all(-1.0 <= s <= 1.0 for s in scores)


def test_identical_text_has_cosine_one_and_empty_list_is_empty(hashing_embedder):
    scorer = BiEncoderScorer(hashing_embedder)
    assert scorer.score("same words", ["same words"]) == [pytest.approx(1.0, abs=1e-6)]
    assert scorer.score("q", []) == []

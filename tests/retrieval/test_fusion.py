from __future__ import annotations

import pytest

from faithrag.retrieval.fusion import reciprocal_rank_fusion


def test_rrf_scores_follow_the_formula():
    fused = dict(reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 63)
    assert fused["d"] == pytest.approx(1 / 62)


def test_rrf_order_weights_and_ties():
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=1)
    assert [key for key, _ in fused] == ["a", "b"]  # equal scores: first seen first
    weighted = reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=1, weights=[1.0, 2.0])
    assert [key for key, _ in weighted] == ["b", "a"]
    assert weighted[0][1] == pytest.approx(1 / 3 + 2 / 2)
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], weights=[1.0, 2.0])


def test_document_in_both_lists_beats_one_list_leader():
    fused = reciprocal_rank_fusion([["x", "both"], ["y", "both"]])
    assert fused[0][0] == "both"

from __future__ import annotations

import math

import pytest

from faithrag.eval import ranking_metrics as M
from faithrag.eval.datasets import RankItem, RankPassage


def rank_item() -> RankItem:
    return RankItem("r", "s", "q", [
        RankPassage("ref", "t", 2), RankPassage("half", "t", 1),
        RankPassage("bad", "t", 0, is_contrary=True), RankPassage("noise", "t", 0)])


def test_ndcg_hand_computed() -> None:
    item = rank_item()
    ideal = 3 + 1 / math.log2(3)
    got = M.ranking_metrics(item, ["bad", "ref", "noise", "half"], ks=(1, 5))
    assert got["ndcg@1"] == 0.0
    assert got["ndcg@5"] == pytest.approx((3 / math.log2(3) + 1 / math.log2(5)) / ideal)
    assert got["contrary@1"] == 1.0 and got["contrary@5"] == 0.25
    perfect = M.ranking_metrics(item, ["ref", "half", "noise", "bad"], ks=(1, 10))
    assert perfect["ndcg@1"] == 1.0 and perfect["ndcg@10"] == pytest.approx(1.0)
    assert perfect["contrary@1"] == 0.0
    # a dropped passage is simply not ranked; the ideal still covers every passage
    dropped = M.ranking_metrics(item, ["ref"], ks=(5,))
    assert dropped["ndcg@5"] == pytest.approx(3 / ideal)
    assert dropped["contrary@5"] == 0.0


def test_ndcg_undefined_without_relevant_passages() -> None:
    assert M.ndcg_at_k(["a", "b"], {"a": 0, "b": 0}, 5) is None
    assert M.contrary_rate_at_k([], {"a"}, 5) is None


def test_ranking_rejects_unknown_or_repeated_ids() -> None:
    with pytest.raises(ValueError, match="not among"):
        M.ranking_metrics(rank_item(), ["ref", "ghost"])
    with pytest.raises(ValueError, match="twice"):
        M.ranking_metrics(rank_item(), ["ref", "ref"])

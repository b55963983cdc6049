"""Reciprocal rank fusion (Cormack et al., 2009): score(d) = sum_r w_r / (k + rank_r(d)), with
1-based ranks; a list that does not contain d adds nothing."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

Key = TypeVar("Key", bound=Hashable)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Key]], k: int = 60,
                           weights: Sequence[float] | None = None) -> list[tuple[Key, float]]:
    """Fuse ranked lists (best first) into one list of (key, score), best first; equal scores
    keep the order in which keys were first seen."""
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking is needed")
    scores: dict[Key, float] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])  # stable: ties keep first-seen order

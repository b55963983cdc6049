"""Ranking metrics for re-ranking runs (pure Python).

nDCG@k with gains 2^rel - 1, discount log2(rank + 1) and the ideal DCG over all of the item's
passages (passages a method drops count as not ranked); undefined (None) when no passage is
relevant. ``contrary@k`` is the share of contrary passages among the first min(k, ranked)
passages.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from faithrag.eval.datasets import RankItem


def _dcg(gains: Iterable[int]) -> float:
    return sum((2.0 ** rel - 1.0) / math.log2(rank + 2) for rank, rel in enumerate(gains))


def _check_ranking(ranked_pids: Sequence[str], known: Iterable[str]) -> None:
    unknown = set(ranked_pids) - set(known)
    if unknown:
        raise ValueError(f"ranked ids not among the item's passages: {sorted(unknown)[:5]}")
    if len(set(ranked_pids)) != len(ranked_pids):
        raise ValueError("ranking lists a passage twice")


def ndcg_at_k(ranked_pids: Sequence[str], relevance: Mapping[str, int], k: int) -> float | None:
    """nDCG@k; None when no passage has relevance > 0."""
    _check_ranking(ranked_pids, relevance)
    ideal = _dcg(sorted(relevance.values(), reverse=True)[:k])
    if ideal == 0:
        return None
    return _dcg(relevance[pid] for pid in ranked_pids[:k]) / ideal


def contrary_rate_at_k(ranked_pids: Sequence[str], contrary: set[str], k: int) -> float | None:
    """Share of contrary passages among the first min(k, len(ranked_pids)); None if empty."""
    top = ranked_pids[:k]
    return sum(pid in contrary for pid in top) / len(top) if top else None


def ranking_metrics(item: RankItem, ranked_pids: Sequence[str], ks: Sequence[int] = (1, 5, 10)
                    ) -> dict[str, float | None]:
    """{"ndcg@k": ..., "contrary@k": ...} for each k, for one ranking item."""
    relevance = item.relevance()
    _check_ranking(ranked_pids, relevance)
    contrary = item.contrary_pids()
    out: dict[str, float | None] = {}
    for k in ks:
        out[f"ndcg@{k}"] = ndcg_at_k(ranked_pids, relevance, k)
    for k in ks:
        out[f"contrary@{k}"] = contrary_rate_at_k(ranked_pids, contrary, k)
    return out

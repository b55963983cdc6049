"""Dialectical retrieval: evidence for the question AND for each counterfactual, in one pool.

Evidence retrieved for a counterfactual is what a correlated-but-wrong answer would rest on;
putting it in the pool lets the arbitration see both sides and the causal score tell them
apart. Steps:
1. retrieve k passages per query (the question's own passages are the pipeline's, when given);
2. merge in query order, dropping a passage whose embedding has cosine > `dedup` (0.95) with one
   already kept (near-duplicates would otherwise outvote the rest);
3. relevance filter against the best of all queries: a passage stays when
   max over queries of cos(query, passage) >= `min_relevance`, and at most `max_evidence` stay,
   by that best relevance (the pool is then ordered by it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from faithrag.methods.base import Retriever
from faithrag.methods.cfrag.vectors import VectorMemo
from faithrag.retrieval.searcher import index_text
from faithrag.types import Passage


@dataclass
class EvidencePool:
    passages: list[Passage]
    relevance: list[float]  # best cosine over all queries, per passage
    retrieved_by: dict[str, list[int]]  # passage id -> indices of the queries that found it
    duplicates: list[tuple[str, str, float]] = field(default_factory=list)  # (dropped, kept, cos)
    irrelevant: list[tuple[str, float]] = field(default_factory=list)  # dropped for relevance
    over_cap: list[str] = field(default_factory=list)  # dropped by max_evidence

    @property
    def texts(self) -> list[str]:
        return [index_text(p) for p in self.passages]


def dialectical_retrieval(queries: Sequence[str], retriever: Retriever, k: int,
                          vectors: VectorMemo, dedup: float, min_relevance: float,
                          max_evidence: int,
                          question_hits: Sequence[Passage] | None = None) -> EvidencePool:
    """`queries[0]` is the question, the rest its counterfactuals."""
    merged: list[Passage] = []
    retrieved_by: dict[str, list[int]] = {}
    for i, query in enumerate(queries):
        hits = question_hits if i == 0 and question_hits is not None else retriever.retrieve(
            query, k)
        for p in hits:
            if p.id not in retrieved_by:
                merged.append(p)
                retrieved_by[p.id] = []
            if i not in retrieved_by[p.id]:
                retrieved_by[p.id].append(i)
    if not merged:
        return EvidencePool([], [], retrieved_by)

    texts = [index_text(p) for p in merged]
    sims = vectors.cosine(texts, texts)
    kept: list[int] = []
    duplicates = []
    for i in range(len(merged)):
        twin = next((j for j in kept if sims[i, j] > dedup), None)
        if twin is None:
            kept.append(i)
        else:
            duplicates.append((merged[i].id, merged[twin].id, round(float(sims[i, twin]), 4)))

    best = vectors.cosine([texts[i] for i in kept], list(queries)).max(axis=1)
    relevant = [(i, float(b)) for i, b in zip(kept, best) if b >= min_relevance]
    irrelevant = [(merged[i].id, round(float(b), 4)) for i, b in zip(kept, best)
                  if b < min_relevance]
    relevant.sort(key=lambda x: -x[1])
    over_cap = [merged[i].id for i, _ in relevant[max_evidence:]]
    relevant = relevant[:max_evidence]
    return EvidencePool(
        passages=[merged[i] for i, _ in relevant],
        relevance=[b for _, b in relevant],
        retrieved_by={merged[i].id: retrieved_by[merged[i].id] for i, _ in relevant},
        duplicates=duplicates, irrelevant=irrelevant, over_cap=over_cap)


def pool_vectors(pool: EvidencePool, vectors: VectorMemo) -> np.ndarray:
    return vectors.embed(pool.texts)

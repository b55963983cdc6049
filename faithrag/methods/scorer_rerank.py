"""Re-ranking by a pointwise relevance scorer (faithrag.retrieval.scorers): each passage is scored
against the question on its own and the list is sorted by score, ties kept in incoming order.
Baselines for crossval: `bi_encoder` (embedding cosine, no LLM) and `llm_judge` (the LLM's
yes/no relevance probability, one call per passage)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from faithrag.llm.base import LLM
from faithrag.methods.base import RerankResult
from faithrag.registry import register
from faithrag.retrieval.scorers.base import RelevanceScorer
from faithrag.types import Passage, Question, Trace

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.retriever import Retriever


class ScorerReranker:
    def __init__(self, scorer: RelevanceScorer, name: str):
        self.scorer = scorer
        self.name = name

    def rerank(self, question: Question, passages: list[Passage], trace: Trace) -> RerankResult:
        with trace.step("rerank", self.name, question=question.text,
                        passages=[p.id for p in passages]) as step:
            scores = self.scorer.score(question.text, [p.text for p in passages], step)
            order = sorted(range(len(passages)), key=lambda i: -scores[i])  # stable on ties
            ranked = [passages[i].with_score(scores[i]) for i in order]
            step.outputs = {"order": [[p.id, round(p.score, 4)] for p in ranked]}
            step.decision = f"ranked {len(ranked)} passages by {self.scorer.name} score"
        return RerankResult(ranked)


@register("reranker", "bi_encoder", description="embedding cosine between question and passage")
def build_bi_encoder(llm: LLM, config: Config, retriever: Retriever | None) -> ScorerReranker:
    from faithrag.retrieval.embedder import get_embedder
    from faithrag.retrieval.scorers import BiEncoderScorer

    embedder = get_embedder(config.retrieval.embedder, use_cache=config.use_cache,
                            threads=config.llm.n_threads)
    return ScorerReranker(BiEncoderScorer(embedder), "bi_encoder")


@register("reranker", "llm_judge", description="the model's yes/no relevance probability")
def build_llm_judge(llm: LLM, config: Config, retriever: Retriever | None) -> ScorerReranker:
    from faithrag.retrieval.scorers import LLMJudgeScorer

    return ScorerReranker(LLMJudgeScorer(llm), "llm_judge")

"""Plain listwise LLM re-ranking (RankGPT style; faithrag.methods.listwise_ranking): the
baseline beside crossval, without conflict handling."""

from __future__ import annotations

from typing import TYPE_CHECKING

from faithrag.llm.base import LLM
from faithrag.methods.base import RerankResult
from faithrag.methods.listwise_ranking import ListwiseRanker, ranker_from_config
from faithrag.registry import register
from faithrag.types import Passage, Question, Trace

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.retriever import Retriever


class ListwiseReranker:
    """Plain listwise LLM re-ranking: the same prompt as crossval's last step, no conflict
    handling. Nothing is removed."""

    name = "listwise"

    def __init__(self, ranker: ListwiseRanker):
        self.ranker = ranker

    def rerank(self, question: Question, passages: list[Passage], trace: Trace) -> RerankResult:
        with trace.step("rerank", self.name, question=question.text,
                        passages=[p.id for p in passages]) as step:
            ranked = self.ranker.rank(question, passages, step)
            step.decision = f"ranked {len(ranked)} passages"
        return RerankResult(ranked)


@register("reranker", "listwise", section="rerank",
          description="RankGPT-style listwise ranking, no conflict handling")
def build_listwise(llm: LLM, config: Config, retriever: Retriever | None) -> ListwiseReranker:
    return ListwiseReranker(ranker_from_config(llm, config))

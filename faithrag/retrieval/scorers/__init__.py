"""Query-passage relevance scorers behind one protocol (base.RelevanceScorer)."""

from faithrag.retrieval.scorers.base import RelevanceScorer
from faithrag.retrieval.scorers.biencoder import BiEncoderScorer
from faithrag.retrieval.scorers.cross_encoder import CrossEncoderScorer
from faithrag.retrieval.scorers.llm_judge import LLMJudgeScorer

__all__ = ["BiEncoderScorer", "CrossEncoderScorer", "LLMJudgeScorer", "RelevanceScorer"]

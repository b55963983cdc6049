"""The `[rerank]` configuration section, shared by the LLM re-rankers (crossval, listwise)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from faithrag.sections import Section, section


@section("rerank")
class RerankConfig(Section):
    """Re-ranking stages (pipeline.rerank). `max_rounds` bounds crossval's detect/cross-validate
    rounds; `window` and `step` are the listwise step's RankGPT sliding window (crossval and
    listwise; crossval's detection sees the first `window` passages); each passage is cut to
    `passage_tokens` tokens in these prompts."""

    max_rounds: int = Field(2, ge=0)
    """crossval: detect / cross-validate rounds at most"""
    window: int = Field(20, ge=2)
    """listwise ranking: passages per window (crossval's detection sees the first window)"""
    step: int = Field(10, ge=1)
    """listwise ranking: how far the window slides"""
    passage_tokens: int = Field(400, ge=16)
    """each passage is cut to this many tokens in ranking prompts"""
    reason_tokens: int = Field(160, ge=16)
    """cross-validation reply: reason + verdict"""
    both_orders: bool = True
    """crossval: judge the pair as (A, B) and (B, A), remove if both agree"""
    verdict: Literal["pairwise", "support"] = "pairwise"
    """crossval's cross-validation: "pairwise" (the paper: one judgement of A vs B with a
    reason) or "support" (each side's answer, then each other passage's yes/no support for it;
    vote)"""
    answer_tokens: int = Field(24, ge=4)
    """support verdict: the reply budget of a side's answer"""
    support_margin: float = Field(1.0, ge=0.0)
    """support verdict: the log-odds lead that makes a vote"""
    same_subject_check: bool = False
    """crossval: before a verdict removes anything, ask whether the pair speaks of the same
    subject (an ambiguous name can mean two entities, each answer valid for one); a pair whose
    log-odds of "same", averaged over both orders, fall below the threshold is left standing"""
    same_subject_threshold: float = -0.5
    """below this log-odds of "same subject" a pair is left standing"""
    final_order: Literal["listwise", "first_stage"] = "listwise"
    """crossval's last step: "listwise" (the paper: the model orders what is left by relevance)
    or "first_stage" (what is left keeps its incoming order; no ranking call), for models whose
    listwise ranking is worse than the retriever's"""

    @model_validator(mode="after")
    def _step_within_window(self) -> RerankConfig:
        if self.step > self.window:
            raise ValueError(f"step ({self.step}) must not exceed window ({self.window})")
        return self

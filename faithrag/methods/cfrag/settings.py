"""The `[cfrag]` configuration section of CF-RAG (faithrag.methods.cfrag)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from faithrag.sections import Section, section


@section("cfrag")
class CFRAGConfig(Section):
    """CF-RAG (faithrag.methods.cfrag): counterfactual queries, dialectical retrieval, spectral
    evidence division and parallel arbitration. The last three switches are the ablations."""

    n_counterfactuals: int = Field(3, ge=1)
    """N: counterfactual queries kept (at most)"""
    k_clusters: int = Field(4, ge=1)
    """K: spectral clusters (clamped to half the evidence)"""
    m_subsets: int = Field(3, ge=1)
    """M: evidence subsets = hypotheses drafted"""
    subset_size: int = Field(4, ge=1)
    """evidence per subset (every cluster gets at least one)"""
    anchor_top: bool = False
    """every subset keeps the pool's most relevant passage (not the paper)"""
    lambda_: float = Field(0.4, ge=0.0, le=1.0)
    """Ψ = (1-λ)·coherence + λ·causal"""
    sim_threshold: float = Field(0.7, ge=-1.0, le=1.0)
    """counterfactual kept if cos(q, q') > this"""
    dedup: float = Field(0.95, ge=-1.0, le=1.0)
    """evidence dropped if cos to a kept one > this"""
    min_relevance: float = Field(0.1, ge=-1.0, le=1.0)
    """best cos over all queries to keep evidence"""
    max_evidence: int = Field(12, ge=1)
    """evidence pool cap, by best relevance"""
    retrieve_k: int | None = Field(None, ge=1)
    """per query; None: retrieval.k"""
    scorer: Literal["llm_judge", "bi_encoder"] = "llm_judge"
    """s(q, e) of the causal score"""
    use_confidence: bool = False
    """add w·exp(mean token log-prob of the draft) to Ψ"""
    use_specificity: bool = False
    """add w·[cos(h, q) - max cos(h, q')] to Ψ"""
    confidence_weight: float = Field(0.1, ge=0.0)
    """w of use_confidence"""
    specificity_weight: float = Field(0.1, ge=0.0)
    """w of use_specificity"""
    counterfactuals: bool = True
    """ablation switch: off = no counterfactual queries"""
    evidence_division: bool = True
    """ablation switch: off = one draft over the whole pool"""
    causal_scoring: bool = True
    """ablation switch: off = Ψ is coherence only"""
    counterfactual_tokens: int = Field(40, ge=8)
    """per reply: one variant or the answer"""
    draft_tokens: int = Field(80, ge=8)
    """a generated rationale and its answer"""
    rationale: Literal["extracted", "generated"] = "extracted"
    """extracted: each draft is vanilla's short-answer prompt over its subset, and its
    rationale the subset's sentence closest to question + answer; generated: the model writes
    answer and rationale (the paper's form)"""
    seed: int = 0
    """subset sampling; combined with a hash of the question"""

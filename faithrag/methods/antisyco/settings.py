"""The `[antisyco]` configuration section of the anti-sycophancy verifier."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from faithrag.sections import Section, section


@section("antisyco")
class AntisycoConfig(Section):
    """Anti-sycophancy verification (pipeline.verify = "antisyco"). `kb` is the TRUSTED source:
    an index directory (`faithrag index`) or a file/folder of documents indexed in memory; it
    must not be the retriever under verification. FALLBACK needs relevance < relevance_threshold
    and an UNSUPPORTED draft that the knowledge base did not confirm; REPAIR needs some claim's
    contradiction >= contradiction_threshold. `judge_tokens` is the reply budget of one
    label/score judgement or reference answer."""

    kb: str | None = None
    """the TRUSTED knowledge base: an index directory, lancedb:URI, or a folder of documents"""
    kb_k: int = Field(2, ge=1)
    """anti-context passages retrieved per claim"""
    kb_chunk_tokens: int = Field(256, ge=16)
    """chunking of a document folder given as kb"""
    kb_chunk_overlap: int = Field(32, ge=0)
    """chunk overlap of a document folder given as kb"""
    relevance_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """FALLBACK when relevance is below this and the draft is UNSUPPORTED"""
    contradiction_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """REPAIR when some claim's contradiction score reaches this (judge mode; in qa mode a claim
    scores 1 when the answers disagree, 0 when they agree)"""
    contradiction: Literal["qa", "judge"] = "qa"
    """how a claim's contradiction is scored: "qa" (answer from the trusted passages, compare)
    or "judge" (the LLM states a verdict and a 0-1 score); see faithrag/methods/antisyco/"""
    max_claims: int = Field(1, ge=1)
    """claims extracted from the draft; a short answer is one fact, raise it for long-form
    answers"""
    judge_tokens: int = Field(24, ge=8)
    """reply budget of one label or score judgement, or a reference answer"""
    claim_tokens: int = Field(96, ge=16)
    """reply budget of the claim list"""
    extract_claims: Literal["long_drafts", "always"] = "long_drafts"
    """"long_drafts": a short draft (at most short_draft_words words, one sentence at most) is
    itself the one claim, with no claim-extraction call; "always": the LLM restates every
    draft as claims"""
    short_draft_words: int = Field(8, ge=1)
    """the most words of a draft checked as one claim without extraction"""
    reuse_draft_reading: bool = True
    """the reflection requests begin as the plain draft prompt does (its system message, the
    passages, the question) and keep it between calls as the draft does, so the embedded model
    restores the draft's reading of the passages instead of reading them again; false: the
    reflection's own auditing prompt, read in full"""
    judgements: Literal["needed", "all"] = "needed"
    """"needed": falsification first, and only the judgements the decision needs (no reflection
    after a contradicted claim or a draft the knowledge base confirmed; the draft's support
    only when relevance is below relevance_threshold); "all": every judgement, the reflection
    first"""
    repair: Literal["reference", "reanswer"] = "reference"
    """"reference": a REPAIR answers with what the contradicting trusted passages gave in
    falsification (qa mode, when the contradicted claims' reference answers agree; for
    multiple choice when it names an option), with no further call; otherwise, and always with
    "reanswer", the answer is asked for again from those passages"""
    fallback_when_confirmed: bool = False
    """false: a draft whose every claim the trusted knowledge base confirmed is never replaced
    by FALLBACK (and, with judgements = "needed", no reflection is asked for it); true: the
    paper's rule, FALLBACK on low relevance and an UNSUPPORTED draft whatever the knowledge
    base said"""

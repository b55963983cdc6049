"""The `[csrag]` configuration section of conflict-suppressed decoding (faithrag.methods.csrag)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from faithrag.sections import Section, section


@section("csrag")
class CSRAGConfig(Section):
    """Conflict-suppressed decoding: logits += alpha*[token in facts] + beta*[token in context]."""

    alpha: float = Field(-1.0, ge=-100.0, le=100.0)
    """on the model's own (parametric) facts; within ±100, the range of OpenAI's and vLLM's
    logit_bias"""
    beta: float = Field(3.0, ge=-100.0, le=100.0)
    """on the enhanced context; within ±100"""
    enhance_context: bool = True
    """append two paraphrases of each passage"""
    filter_stopwords: bool = True
    """drop NLTK English stopwords and punctuation from both sets"""
    case_variants: bool = False
    """also each word's lower-cased and capitalised spellings"""
    answer_mode: Literal["json", "choices", "json_scored"] = "json"
    """choices: score the options, bias applied; json_scored: the JSON reply's Reason unbiased,
    then the options scored in its Answer slot with the bias"""
    fact_tokens: int = Field(200, ge=16)
    """reply budget of the parametric facts"""
    paraphrase_tokens: int = Field(1024, ge=64)
    """cap for the two paraphrases of one passage"""
    probe_choices: bool = False
    """also record option probabilities with and without the bias"""
    cache_facts: bool = True
    """reuse a question's facts (off to time online CSRAG honestly)"""
    ablation_grid: bool = False
    """scored answers: also score every ablation cell, same forward pass"""

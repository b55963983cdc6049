"""Typed configuration, loadable from TOML, with CLI overrides. Invalid values fail eagerly with a
ConfigError that names the key."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from faithrag.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def cache_dir() -> Path:
    """Root of all on-disk caches (models, wheels, paraphrases, embeddings)."""
    return Path(os.environ.get("FAITHRAG_CACHE", Path.home() / ".cache" / "faithrag"))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LLMConfig(_Strict):
    backend: Literal["llamacpp", "openai", "transformers", "fake"] = "llamacpp"
    model: str = "default"  # preset (default|fast|tiny), a .gguf path, or the server's model name
    n_ctx: int = Field(4096, ge=256)
    n_threads: int | None = Field(None, ge=1)
    n_batch: int = Field(512, ge=1)
    # llama.cpp: keep the recurring leading messages of requests (few-shot turns) between calls;
    # reproducible, but results differ slightly from the default (see faithrag/llm/llamacpp.py)
    prefix_cache: bool = False
    # llama.cpp, greedy decoding: draft up to this many tokens by prompt lookup (the tokens that
    # followed the last `lookup_ngram` tokens where they occurred before) and keep what the
    # model's picks confirm; 0 = off. Faster on copying outputs, and results differ slightly
    # from plain decoding, like prefix_cache (see faithrag/llm/lookup.py and BENCHMARKS.md)
    lookup_tokens: int = Field(0, ge=0)
    lookup_ngram: int = Field(3, ge=1)
    # openai backend
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key: str = ""
    tokenizer: str = "server"  # "server" (/tokenize endpoint), a preset, a .gguf or tokenizer.json path
    timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(3, ge=0)
    concurrency: int = Field(4, ge=1)
    logit_bias_cap: int | None = Field(None, ge=1)  # e.g. 300 for api.openai.com
    # transformers backend
    torch_dtype: str = "bfloat16"


class RetrievalConfig(_Strict):
    mode: Literal["bm25", "dense", "hybrid"] = "bm25"
    k: int = Field(5, ge=1)
    chunk_tokens: int = Field(250, ge=16)
    chunk_overlap: int = Field(50, ge=0)
    embedder: str = "minilm"
    rrf_k: int = Field(60, ge=1)


class GenerationConfig(_Strict):
    max_tokens: int = Field(256, ge=1)  # formats that reason before answering (JSON, drafts)
    answer_tokens: int = Field(48, ge=1)  # short free-form answers
    temperature: float = Field(0.0, ge=0.0)


class CFRAGConfig(_Strict):
    """CF-RAG (faithrag.methods.cfrag): counterfactual queries, dialectical retrieval, spectral
    evidence division and parallel arbitration. The last three switches are the ablations."""

    n_counterfactuals: int = Field(3, ge=1)  # N: counterfactual queries kept (at most)
    k_clusters: int = Field(4, ge=1)  # K: spectral clusters (clamped to half the evidence)
    m_subsets: int = Field(3, ge=1)  # M: evidence subsets = hypotheses drafted
    subset_size: int = Field(4, ge=1)  # evidence per subset (every cluster gets at least one)
    anchor_top: bool = False  # every subset keeps the pool's most relevant passage (not the paper)
    lambda_: float = Field(0.4, ge=0.0, le=1.0)  # Ψ = (1-λ)·coherence + λ·causal
    sim_threshold: float = Field(0.7, ge=-1.0, le=1.0)  # counterfactual kept if cos(q, q') > this
    dedup: float = Field(0.95, ge=-1.0, le=1.0)  # evidence dropped if cos to a kept one > this
    min_relevance: float = Field(0.1, ge=-1.0, le=1.0)  # best cos over all queries to keep evidence
    max_evidence: int = Field(12, ge=1)  # evidence pool cap, by best relevance
    retrieve_k: int | None = Field(None, ge=1)  # per query; None: retrieval.k
    scorer: Literal["llm_judge", "bi_encoder"] = "llm_judge"  # s(q, e) of the causal score
    use_confidence: bool = False  # add w·exp(mean token log-prob of the draft) to Ψ
    use_specificity: bool = False  # add w·[cos(h, q) - max cos(h, q')] to Ψ
    confidence_weight: float = Field(0.1, ge=0.0)
    specificity_weight: float = Field(0.1, ge=0.0)
    counterfactuals: bool = True  # ablation switch: off = no counterfactual queries
    evidence_division: bool = True  # ablation switch: off = one draft over the whole pool
    causal_scoring: bool = True  # ablation switch: off = Ψ is coherence only
    counterfactual_tokens: int = Field(40, ge=8)  # per reply: one variant or the answer
    draft_tokens: int = Field(80, ge=8)  # a generated rationale and its answer
    # extracted: each draft is vanilla's short-answer prompt over its subset, and its rationale
    # the subset's sentence closest to question + answer; generated: the model writes answer
    # and rationale (the paper's form). Asked to write a rationale, the 1.5B default model
    # answered 6 of 20 items that vanilla's prompt answered 10 of, on the same passages.
    rationale: Literal["extracted", "generated"] = "extracted"
    seed: int = 0  # subset sampling; combined with a hash of the question


class PipelineConfig(_Strict):
    method: str = "vanilla"
    rerank: str | None = None
    verify: str | None = None


class CSRAGConfig(_Strict):
    """Conflict-suppressed decoding: logits += alpha*[token in facts] + beta*[token in context]."""

    alpha: float = -1.0  # on the model's own (parametric) facts
    beta: float = 3.0  # on the enhanced context
    enhance_context: bool = True  # append two paraphrases of each passage
    filter_stopwords: bool = True  # drop NLTK English stopwords and punctuation from both sets
    case_variants: bool = False  # also each word's lower-cased and capitalised spellings
    # choices: score the options, bias applied; json_scored: the JSON reply's Reason unbiased,
    # then the options scored in its Answer slot with the bias
    answer_mode: Literal["json", "choices", "json_scored"] = "json"
    fact_tokens: int = Field(200, ge=16)
    paraphrase_tokens: int = Field(1024, ge=64)  # cap for the two paraphrases of one passage
    probe_choices: bool = False  # also record option probabilities with and without the bias
    cache_facts: bool = True  # reuse a question's facts (off to time online CSRAG honestly)
    ablation_grid: bool = False  # scored answers: also score every ablation cell, same forward pass


class RerankConfig(_Strict):
    """Re-ranking stages (pipeline.rerank). `max_rounds` bounds crossval's detect/cross-validate
    rounds; `window` and `step` are the listwise step's RankGPT sliding window (crossval and
    listwise; crossval's detection sees the first `window` passages); each passage is cut to
    `passage_tokens` tokens in these prompts."""

    max_rounds: int = Field(2, ge=0)
    window: int = Field(20, ge=2)
    step: int = Field(10, ge=1)
    passage_tokens: int = Field(400, ge=16)
    reason_tokens: int = Field(160, ge=16)  # cross-validation reply: reason + verdict
    both_orders: bool = True  # crossval: judge the pair as (A, B) and (B, A), remove if both agree
    # crossval's cross-validation: "pairwise" (the paper: one judgement of A vs B with a reason)
    # or "support" (each side's answer, then each other passage's yes/no support for it; vote)
    verdict: Literal["pairwise", "support"] = "pairwise"
    answer_tokens: int = Field(24, ge=4)  # "support": the reply budget of a side's answer
    support_margin: float = Field(1.0, ge=0.0)  # "support": log-odds lead that makes a vote
    # crossval: before a verdict removes anything, ask whether the pair speaks of the same
    # subject (an ambiguous name can mean two entities, each answer valid for one); a pair whose
    # log-odds of "same", averaged over both orders, fall below the threshold is left standing
    same_subject_check: bool = False
    same_subject_threshold: float = -0.5  # measured on ramdocs_rank: BENCHMARKS.md
    # crossval's last step: "listwise" (the paper: the model orders what is left by relevance)
    # or "first_stage" (what is left keeps its incoming order; no ranking call), for models
    # whose listwise ranking is worse than the retriever's (BENCHMARKS.md, ramdocs_rank)
    final_order: Literal["listwise", "first_stage"] = "listwise"

    @model_validator(mode="after")
    def _step_within_window(self) -> RerankConfig:
        if self.step > self.window:
            raise ValueError(f"step ({self.step}) must not exceed window ({self.window})")
        return self


class AntisycoConfig(_Strict):
    """Anti-sycophancy verification (pipeline.verify = "antisyco"). `kb` is the TRUSTED source:
    an index directory (`faithrag index`) or a file/folder of documents indexed in memory; it
    must not be the retriever under verification. FALLBACK needs relevance < relevance_threshold
    and an UNSUPPORTED draft; REPAIR needs some claim's contradiction >= contradiction_threshold.
    `judge_tokens` is the reply budget of one label/score judgement or reference answer."""

    kb: str | None = None
    kb_k: int = Field(2, ge=1)  # anti-context passages retrieved per claim
    kb_chunk_tokens: int = Field(256, ge=16)  # chunking of a document folder given as kb
    kb_chunk_overlap: int = Field(32, ge=0)
    relevance_threshold: float = Field(0.5, ge=0.0, le=1.0)
    contradiction_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # how a claim's contradiction is scored: "qa" (answer from the trusted passages, compare) or
    # "judge" (the LLM states a verdict and a 0-1 score); see faithrag/methods/antisyco.py
    contradiction: Literal["qa", "judge"] = "qa"
    # a short answer is one fact; with 2, the 1.5B default model invented a second, unrelated
    # claim for 5 of 5 KRE drafts. Raise it for long-form answers.
    max_claims: int = Field(1, ge=1)
    judge_tokens: int = Field(24, ge=8)
    claim_tokens: int = Field(96, ge=16)  # reply budget of the claim list


def set_dotted(data: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Write dotted overrides like {"llm.model": "tiny"} into nested ``data``; None is skipped."""
    for dotted, value in overrides.items():
        if value is None:
            continue
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value


class Config(_Strict):
    llm: LLMConfig = LLMConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    generation: GenerationConfig = GenerationConfig()
    pipeline: PipelineConfig = PipelineConfig()
    cfrag: CFRAGConfig = CFRAGConfig()
    rerank: RerankConfig = RerankConfig()
    csrag: CSRAGConfig = CSRAGConfig()
    antisyco: AntisycoConfig = AntisycoConfig()
    use_cache: bool = True

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
        """Read TOML (if given), then apply dotted overrides like {"llm.model": "tiny"}."""
        data: dict[str, Any] = {}
        if path is not None:
            p = Path(path)
            if not p.is_file():
                raise ConfigError(f"Config file not found: {p}", "Pass an existing TOML file.")
            try:
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{p} is not valid TOML: {exc}", "Fix the syntax.") from exc
        set_dotted(data, overrides or {})
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ConfigError(f"Bad config value for '{where}': {first['msg']}",
                              "See README.md, section Configuration, for the allowed values.") from exc

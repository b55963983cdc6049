"""Typed configuration, loadable from TOML, with CLI overrides. Invalid values fail eagerly with a
ConfigError that names the key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from faithrag import registry
from faithrag.errors import ConfigError
from faithrag.paths import cache_dir  # noqa: F401  (its old import path)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class _Strict(BaseModel):
    """Every section: unknown keys refused, assignments validated, and every float finite (NaN
    and infinities refused, from TOML, `--set` and Python alike)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True,
                              use_attribute_docstrings=True, allow_inf_nan=False)

    def __setattr__(self, name: str, value: Any) -> None:
        """An invalid assignment is a ConfigError naming the key, as an invalid load is."""
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise ConfigError(f"Bad config value for '{name}': {exc.errors()[0]['msg']}",
                              "`faithrag config` lists every key with its type and default."
                              ) from exc


class LLMConfig(_Strict):
    """The model and the backend that runs it."""

    backend: Literal["llamacpp", "openai", "transformers", "fake"] = "llamacpp"
    """llamacpp: embedded GGUF model (extra `llamacpp`); openai: any OpenAI-compatible server;
    transformers: a Hugging Face model (extra `hf`); fake: the scripted test model"""
    model: str = "default"
    """a preset (default, fast, tiny), a .gguf path, or the server's model name"""
    n_ctx: int | None = Field(None, ge=256)
    """context window in tokens; unset: 4096 embedded, the server's own over HTTP"""
    n_threads: int | None = Field(None, ge=1)
    """CPU threads of the embedded model; unset: the usable cores"""
    n_batch: int = Field(512, ge=1)
    """llama.cpp: prompt tokens evaluated per batch"""
    prefix_cache: bool = False
    """llama.cpp: keep the recurring leading messages of requests (few-shot turns) between
    calls; reproducible, but results differ slightly from the default"""
    lookup_tokens: int = Field(0, ge=0)
    """llama.cpp, greedy decoding: draft up to this many tokens by prompt lookup and keep what
    the model's picks confirm; 0 = off. Results differ slightly from plain decoding"""
    lookup_ngram: int = Field(3, ge=1)
    """llama.cpp: the n-gram that prompt lookup matches"""
    base_url: str = "http://127.0.0.1:8000/v1"
    """openai: the server's URL, up to and including /v1"""
    api_key: str = Field("", repr=False)
    """openai: bearer token sent to the server (left out of the configuration's repr)"""
    tokenizer: str = "server"
    """openai: where token ids come from: "server" (its /tokenize endpoint), a preset, a .gguf
    or a tokenizer.json path"""
    timeout: float = Field(120.0, gt=0, le=86_400)
    """openai: seconds per request (at most a day)"""
    max_retries: int = Field(3, ge=0)
    """openai: retries of a request that failed to connect or timed out"""
    concurrency: int = Field(4, ge=1)
    """openai: requests in flight at once"""
    logit_bias_cap: int | None = Field(None, ge=1)
    """openai: most logit_bias entries the server takes (300 for api.openai.com); unset: all"""
    torch_dtype: str = "bfloat16"
    """transformers: the weights' dtype"""
    constrain: bool = True
    """constrain structured replies (JSON answers, judgements, rankings) to their schema or
    grammar where the backend can; false: ask without constraint (the tolerant readers still
    apply), to measure what constraint changes"""


class RetrievalConfig(_Strict):
    """How passages are chunked and retrieved."""

    mode: Literal["bm25", "dense", "hybrid"] = "bm25"
    """bm25; dense (embeddings, extra `dense`); hybrid (both, fused by reciprocal rank)"""
    k: int = Field(5, ge=1)
    """passages retrieved per question"""
    chunk_tokens: int = Field(250, ge=16)
    """words per passage when documents are chunked"""
    chunk_overlap: int = Field(50, ge=0)
    """words shared by consecutive passages"""
    embedder: str = "minilm"
    """dense and hybrid retrieval: the embedding model"""
    rrf_k: int = Field(60, ge=1)
    """hybrid: the k of reciprocal rank fusion"""


class GenerationConfig(_Strict):
    """Reply budgets and sampling of the answer step."""

    max_tokens: int = Field(256, ge=1)
    """replies that reason before answering (JSON answers, drafts); their schemas are sized
    for it, and a constrained reply may run to 3× to close its structure (docs/backends.md)"""
    answer_tokens: int = Field(48, ge=1)
    """short free-form answers"""
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """0 = greedy decoding; at most 2 (the OpenAI API's range)"""


class CFRAGConfig(_Strict):
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


class _PipelineSection(_Strict):
    def stages(self) -> list[tuple[str, str]]:
        """(kind, name) of each stage that runs, in pipeline order."""
        return [(entry.kind, getattr(self, entry.key)) for entry in registry.run_order()
                if getattr(self, entry.key) is not None]


# one key per stage kind (faithrag.registry.KINDS), then the conflict policy
PipelineConfig = create_model(
    "PipelineConfig", __base__=_PipelineSection, __module__=__name__,
    __doc__="Which stage runs at each step; names come from faithrag.registry.",
    **{entry.key: (str, Field(entry.default, description=entry.doc)) if not entry.optional
       else (str | None, Field(None, description=f"{entry.doc}; unset: none"))
       for entry in registry.KINDS},
    on_conflict=(Literal["resolve", "surface", "abstain"], Field(
        "resolve", description="what the answer does when a stage reports a conflict. "
        "resolve: the stages' own decision; surface: give each reading with its sources; "
        "abstain: say the evidence conflicts and show the sides")))


class ConflictsConfig(_Strict):
    """The conflict detector (pipeline.detect = "conflicts"). When the passages give two or more
    different answers, the first passage of each of the two largest answer groups is judged:
    the same subject or not (log-odds of "Yes", averaged over both orders)."""

    same_subject_threshold: float = -0.5
    """below this log-odds of "same subject" the disagreement is reported as `ambiguous` (both
    answers may be right), otherwise as `passage_vs_passage`; lower it for fewer, surer
    `ambiguous` reports"""


class CSRAGConfig(_Strict):
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


class RerankConfig(_Strict):
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


class PoisonFilterConfig(_Strict):
    """The KB-free poisoning filter (pipeline.rerank = "poison_filter",
    faithrag/methods/poison_filter.py): crafted clusters are found in the retrieval embedder's
    space, altered copies by aligning the passages' words."""

    crafted_clusters: bool = True
    """remove groups of passages written alike for the question"""
    cluster_similarity: float = Field(0.8, ge=-1.0, le=1.0)
    """two passages are alike at this embedding cosine or above"""
    query_similarity: float = Field(0.55, ge=-1.0, le=1.0)
    """a crafted cluster's members are at least this close to the question on average"""
    min_cluster: int = Field(3, ge=2)
    """passages a crafted cluster holds at least (before the halo joins)"""
    halo_similarity: float = Field(0.6, ge=-1.0, le=1.0)
    """a passage this close to a crafted cluster's members on average joins it"""
    altered_copies: bool = True
    """remove passages that are one text with a stretch replaced"""
    copy_coverage: float = Field(0.7, gt=0.0, le=1.0)
    """two passages are copies when their aligned words cover this share of the shorter"""
    max_edit_words: int = Field(12, ge=1)
    """a replaced stretch is at most this many words on each side"""
    anchor_words: int = Field(5, ge=1)
    """a replaced stretch lies next to an unchanged run of at least this many words"""
    max_edits: int = Field(8, ge=1)
    """copies differing in more places than this are different texts, unless rewritten"""
    rewrite_coverage: float = Field(0.85, gt=0.0, le=1.0)
    """copies differing in many places are one text rewritten when their aligned words cover
    this share of the longer"""


class AntisycoConfig(_Strict):
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


class ServerConfig(_Strict):
    """Limits of `faithrag serve`, all enforced before any model work (its flags of the same
    names override them; docs/server.md), and what its chat completions add to a reply."""

    header_timeout: float = Field(8.0, gt=0.0, le=3600.0)
    """seconds from a connection's opening, or its last response, to the end of a request's
    headers; a client still sending them then gets 408 and the connection is closed"""
    body_timeout: float = Field(30.0, gt=0.0, le=3600.0)
    """seconds a client may take to send a whole request body (408 after)"""
    request_timeout: float = Field(120.0, gt=0.0, le=86_400.0)
    """seconds one request may take, queueing included (504 after)"""
    max_connections: int = Field(128, ge=1)
    """open connections at once; one more is answered 503 and closed"""
    max_connections_per_client: int = Field(32, ge=1)
    """open connections at once from one client address; one more is answered 503 and closed"""
    max_body_bytes: int = Field(1 << 20, ge=1)
    """largest request body (413 beyond)"""
    max_passages: int = Field(1000, ge=1)
    """most passages in one request (413 beyond)"""
    max_passage_chars: int = Field(20_000, ge=1)
    """longest passage text in characters (413 beyond)"""
    max_question_chars: int = Field(2_000, ge=1)
    """longest question in characters (413 beyond)"""
    conflict_summary: bool = True
    """end a text chat completion whose run met conflicts with the line `[faithrag:
    conflicts=...; sides=...; actions=...]` (a request's `"faithrag": {"summary": false}`
    leaves it out)"""


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
    poison_filter: PoisonFilterConfig = PoisonFilterConfig()
    csrag: CSRAGConfig = CSRAGConfig()
    antisyco: AntisycoConfig = AntisycoConfig()
    conflicts: ConflictsConfig = ConflictsConfig()
    server: ServerConfig = ServerConfig()
    use_cache: bool = True
    """cache paraphrases, facts and embeddings under FAITHRAG_CACHE (results do not change)"""

    @model_validator(mode="after")
    def _stages_registered(self) -> Config:
        """Every stage named in `pipeline` is registered, and an `on_conflict` policy that acts
        on conflicts has a stage that reports them."""
        for kind, name in self.pipeline.stages():
            registry.stage(kind, name)
        registry.check_conflict_policy(self.pipeline.on_conflict,
                                       self.pipeline.stages())  # type: ignore[arg-type]
        return self

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
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{p} is not UTF-8 text (byte {exc.start} cannot be read).",
                                  "Save the configuration as UTF-8 TOML.") from exc
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{p} is not valid TOML: {exc}", "Fix the syntax.") from exc
        set_dotted(data, overrides or {})
        return cls.validated(data)

    @classmethod
    def validated(cls, data: dict[str, Any]) -> Config:
        """`data` validated, with the first problem raised as a ConfigError naming its key."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ConfigError(f"Bad config value for '{where}': {first['msg']}",
                              "`faithrag config` lists every key with its type and default."
                              ) from exc

"""Typed configuration, loadable from TOML, with CLI overrides. Invalid values fail eagerly with a
ConfigError that names the key.

`Config` is assembled the first time it is used: the core sections defined here (llm,
retrieval, generation, pipeline, conflicts, server), then every section a stage declares in its
own module (faithrag.sections.section), which the registry's built-in stages bring along. The
sections' classes are importable from here too (`from faithrag.config import CFRAGConfig`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, create_model, model_validator

from faithrag import registry
from faithrag.errors import ConfigError
from faithrag.paths import cache_dir  # noqa: F401  (its old import path)
from faithrag.sections import Section, registered, seal, section

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class LLMConfig(Section):
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


class RetrievalConfig(Section):
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


class GenerationConfig(Section):
    """Reply budgets and sampling of the answer step."""

    max_tokens: int = Field(256, ge=1)
    """replies that reason before answering (JSON answers, drafts); their schemas are sized
    for it, and a constrained reply may run to 3× to close its structure (docs/backends.md)"""
    answer_tokens: int = Field(48, ge=1)
    """short free-form answers"""
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """0 = greedy decoding; at most 2 (the OpenAI API's range)"""


class _PipelineSection(Section):
    @model_validator(mode="before")
    @classmethod
    def _none_means_no_stage(cls, data: Any) -> Any:
        """An optional kind's key given as "none" (any case) runs no stage of that kind."""
        if not isinstance(data, dict):
            return data
        return {key: None if (isinstance(value, str) and value.lower() == registry.NONE
                              and key in _OPTIONAL_KEYS) else value
                for key, value in data.items()}

    def stages(self) -> list[tuple[str, str]]:
        """(kind, name) of each stage that runs, in pipeline order."""
        return [(entry.kind, getattr(self, entry.key)) for entry in registry.run_order()
                if getattr(self, entry.key) is not None]


_OPTIONAL_KEYS = frozenset(entry.key for entry in registry.KINDS if entry.optional)

# one key per stage kind (faithrag.registry.KINDS), then the conflict policy
PipelineConfig = create_model(
    "PipelineConfig", __base__=_PipelineSection, __module__=__name__,
    __doc__="Which stage runs at each step; names come from faithrag.registry.",
    **{entry.key: (str, Field(entry.default, description=entry.doc)) if not entry.optional
       else (str | None, Field(entry.default, description=f'{entry.doc}; "none": none'))
       for entry in registry.KINDS},
    on_conflict=(Literal["resolve", "surface", "flag", "by_kind", "abstain"], Field(
        "by_kind", description="what the answer does when a stage reports a conflict. "
        "resolve: the stages' own decision; surface: give each reading with its sources; "
        "flag: the stages' answer, naming the passages that disagree; by_kind: flag where one "
        "side is an edited copy of another or a trusted source contradicted or confirmed the "
        "answer, surface otherwise; abstain: say the evidence conflicts and show the sides")))


@section("conflicts")
class ConflictsConfig(Section):
    """The conflict detector (pipeline.detect = "conflicts"): when the model's closed-book answer
    counts as knowledge, and, when the passages give two or more different answers, which
    answers are off-subject and whether the rest speak of one subject (log-odds of "Yes",
    scored after the passages, as the detector asks it)."""

    memory_check: bool = False
    """ask the model the question closed-book (one more short call per question) and report
    `context_vs_memory` when it knows an answer the passages contradict; off, the closed-book
    call is made only when `low_relevance` turns on it and `context_vs_memory` is not checked"""
    memory_confidence: float = -0.3
    """the closed-book answer's mean token log-probability from which the model is taken to
    know it; below it the answer is a guess and no `context_vs_memory` conflict is reported"""
    subject_coverage: float = Field(0.6, ge=0.0, le=1.0)
    """the share of the question's anchors (quoted titles, capitalised words, numbers) a
    passage must hold to speak of what the question asks; below it the passage is not read and
    a dissenting answer is off-subject (a lookalike) and set aside; lower it to set fewer aside"""
    same_subject_check: bool = False
    """when documents on the question's subject give different answers, ask the model whether
    they speak of one subject (two scored requests) and report `ambiguous` when they do not;
    off, they are `passage_vs_passage` and `ambiguous` is not checked"""
    same_subject_threshold: float = 0.5
    """below this log-odds of "same subject" the disagreement is reported as `ambiguous` (both
    answers may be right), otherwise as `passage_vs_passage`; lower it for fewer, surer
    `ambiguous` reports"""


class ServerConfig(Section):
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


class _Config(Section):
    """The whole configuration: the core sections and every registered one (`Config`)."""

    @model_validator(mode="after")
    def _stages_registered(self) -> _Config:
        """Every stage named in `pipeline` is registered, and an `on_conflict` policy that acts
        on conflicts has a stage that reports them."""
        for kind, name in self.pipeline.stages():
            registry.stage(kind, name)
        registry.check_conflict_policy(self.pipeline.on_conflict,
                                       self.pipeline.stages())  # type: ignore[arg-type]
        return self

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> _Config:
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
    def validated(cls, data: dict[str, Any]) -> _Config:
        """`data` validated, with the first problem raised as a ConfigError naming its key."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ConfigError(f"Bad config value for '{where}': {first['msg']}",
                              "`faithrag config` lists every key with its type and default."
                              ) from exc


# the sections defined here that are not a stage's (Config's fields besides the registered ones)
CORE_SECTIONS = ("llm", "retrieval", "generation", "pipeline", "server")


def _assemble() -> type[_Config]:
    """`Config`: the core sections, the registered sections (sorted by name; the built-in
    stages, and with them their sections, are loaded first), the server's, and `use_cache`."""
    registry.load_builtins()
    stage_sections = seal()
    core = {"llm": LLMConfig, "retrieval": RetrievalConfig, "generation": GenerationConfig,
            "pipeline": PipelineConfig}
    clash = sorted(set(stage_sections) & {*CORE_SECTIONS, "use_cache"})
    if clash:
        raise ValueError(f"configuration section {clash[0]!r} is a core section")
    fields: dict[str, Any] = {name: (cls, cls()) for name, cls in
                              {**core, **stage_sections, "server": ServerConfig}.items()}
    fields["use_cache"] = (bool, Field(True, description=(
        "cache paraphrases, facts and embeddings under FAITHRAG_CACHE (results do not "
        "change)")))
    return create_model("Config", __base__=_Config, __module__=__name__,
                        __doc__=_Config.__doc__, **fields)


_assembling = False


def __getattr__(name: str) -> Any:
    """`Config`, assembled on first use; a registered section's class by its name."""
    global _assembling
    if name == "Config":
        if _assembling:
            raise ImportError("faithrag.config.Config was used while the stages that configure "
                              "it were loading; a module a stage imports must import Config "
                              "under TYPE_CHECKING (or inside a function)")
        _assembling = True
        try:
            globals()["Config"] = config = _assemble()
        finally:
            _assembling = False
        return config
    if not name.startswith("_"):
        for cls in registered().values():
            if cls.__name__ == name:
                return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

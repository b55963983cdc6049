"""The one place where the pipeline's stage kinds are declared (KINDS) and every stage declares
itself.

KINDS is the table of stage kinds (StageKind: name, configuration key and CLI flag, label,
protocol method, what its call's result becomes, run order); the pipeline's loop, the
configuration's `[pipeline]` keys, the CLI flags, the server's request fields and
`/v1/methods`, and the evaluation manifest and report labels are derived from it
(docs/contributing.md adds a kind). A stage module registers a factory under a kind and a name; everything that lists or checks
stage names (configuration validation, the CLI's help, the server's `/v1/methods`, the
evaluation harness's choice handling, reports) asks this registry instead of keeping its own
list. Adding a stage is writing its module: the built-in ones under `faithrag.methods` are
loaded the first time the registry is asked; a stage defined elsewhere is registered when its
module is imported.

Contract:
- `register(kind, name, ...)` decorates a factory `(llm, config, retriever) -> stage`; a name is
  registered once per kind (a second registration raises ValueError).
- `stage(kind, name)` returns the StageSpec, or raises ConfigError naming the known names.
- `section` names the Config section that configures the stage: a core one, or one that a
  module declares with faithrag.sections.section, which must be imported before the stage is
  registered (None: it reads only the shared sections `generation` and `retrieval`).
- `choices` marks generators that answer by picking one of the question's options;
  `scores_options` those that score the options' tokens after a partial answer, which a backend
  may be unable to do exactly (its `check_answer_scoring(name)` then refuses the stage).
- `reports_conflicts` names the kinds of conflict (faithrag.types.CONFLICT_KINDS) a stage adds
  to the conflict report (`Step.conflicts`); a pipeline with an `on_conflict` policy other than
  "resolve" needs a stage that reports a kind the policy acts on (`check_conflict_policy`).
- `requires(config)`, if given, raises ConfigError when the configuration lacks what the stage
  needs (a verifier's knowledge base); `Pipeline.from_config` runs it before any model loads.

Example:
    from faithrag.registry import register

    @register("generator", "echo", description="answers with the question")
    def build_echo(llm, config, retriever):
        return Echo()
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from faithrag.errors import ConfigError
from faithrag.types import CONFLICT_KINDS, POLICY_KINDS

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.llm.base import LLM
    from faithrag.retrieval.retriever import Retriever

Kind = str  # a StageKind.kind: "generator", "reranker", "verifier", "detector"
Factory = Callable[["LLM", "Config", "Retriever | None"], Any]
Slot = Literal["passages", "answer", "conflicts"]


@dataclass(frozen=True)
class StageKind:
    """One kind of pipeline stage, declared once in KINDS; the pipeline's loop, the
    configuration's `[pipeline]` keys, the CLI's flags, the server's request fields and
    `/v1/methods`, and the evaluation manifest and report labels are all derived from it.

    - `kind`: the registry's name for it (`register(kind, ...)`), and the `Pipeline`
      constructor's argument that takes a built one; `label` how users are told of it
      ("Unknown re-ranker 'x'").
    - `key`: the `[pipeline]` configuration key, the keyword of `Pipeline.from_config`, the
      server's request field and the evaluation manifest's key; `flag` (`--KEY`) the CLI's.
    - `call`: the method of the stage protocol (faithrag.methods.base) the pipeline calls,
      with `(question, passages, trace)`, or with `(question, passages, answer, trace)` when
      `reads_answer`.
    - `slot`: what its call's return value becomes: "passages" (a RerankResult: the passages
      kept, in order, and the removed ones), "answer" (the answer from then on) or "conflicts"
      (the conflicts it reports, already on the trace; nothing else changes).
    - `order`: its place in a run (sorted ascending; retrieval comes first).
    - `listing`: its field of `/v1/methods`; `doc` the configuration key's meaning and `cli`
      the flag's help, each followed by what the flag lists or leaving it unset means.
    - `default`: the stage the default pipeline runs (None: none); `plain` the one plain RAG
      runs (PLAIN_RAG: the generator's default, no other stage). A kind whose `plain` is None
      is `optional`: its key can be set to "none" (None from Python) to run no stage of it."""

    kind: str
    key: str
    label: str
    call: str
    slot: Slot
    order: int
    listing: str
    doc: str
    cli: str
    reads_answer: bool = False
    default: str | None = None
    plain: str | None = None

    @property
    def flag(self) -> str:
        return f"--{self.key.replace('_', '-')}"

    @property
    def config_key(self) -> str:
        return f"pipeline.{self.key}"

    @property
    def optional(self) -> bool:
        return self.plain is None


NONE = "none"  # an optional kind's key set to this runs no stage of the kind

# The stage kinds, in the order they are listed to users (flags, configuration keys,
# /v1/methods); `order` is the order they run in.
KINDS: tuple[StageKind, ...] = (
    StageKind("generator", "method", "method", "generate", "answer", 20, "methods",
              doc="the answer generator", cli="answer method",
              default="vanilla", plain="vanilla"),
    StageKind("reranker", "rerank", "re-ranker", "rerank", "passages", 10, "rerankers",
              doc="the re-ranker", cli="re-ranking stage"),
    StageKind("verifier", "verify", "verifier", "verify", "answer", 30, "verifiers",
              doc="the verifier", cli="verification stage",
              reads_answer=True),
    StageKind("detector", "detect", "conflict detector", "detect", "conflicts", 40, "detectors",
              doc="the conflict detector: reports the conflicts the evidence holds and changes "
                  "nothing", cli="conflict detector, reports and changes nothing",
              reads_answer=True, default="conflicts"),
)


def stage_kind(name: str) -> StageKind:
    """The StageKind named `name` (its `kind`); ValueError naming the known ones if none."""
    for entry in KINDS:
        if entry.kind == name:
            return entry
    raise ValueError(f"unknown stage kind {name!r}; one of {', '.join(k.kind for k in KINDS)}")


# Plain RAG as dotted configuration overrides: each kind's `plain` stage (the generator alone),
# the stages' own answer kept (`Pipeline.from_config(plain=True)`, `--plain`).
PLAIN_RAG: dict[str, str] = {**{entry.config_key: entry.plain or NONE for entry in KINDS},
                             "pipeline.on_conflict": "resolve"}


def run_order() -> list[StageKind]:
    """KINDS in the order a pipeline runs them."""
    return sorted(KINDS, key=lambda entry: entry.order)


@dataclass(frozen=True)
class StageSpec:
    """A registered stage: what builds it and what it supports."""

    kind: Kind
    name: str
    factory: Factory
    section: str | None = None
    choices: bool = False
    description: str = ""
    requires: Callable[[Config], None] | None = None
    scores_options: bool = False
    reports_conflicts: tuple[str, ...] = ()

    def check(self, config: Config) -> None:
        """Raise ConfigError if `config` lacks what this stage needs."""
        if self.requires is not None:
            self.requires(config)

    def build(self, llm: LLM, config: Config, retriever: Retriever | None = None) -> Any:
        """The stage around `llm` (ConfigError when it is not a loaded model)."""
        from faithrag.llm.base import require_llm

        return self.factory(require_llm(llm), config, retriever)


_STAGES: dict[str, dict[str, StageSpec]] = {entry.kind: {} for entry in KINDS}
_builtins_loaded = False


def register(kind: Kind, name: str, *, section: str | None = None, choices: bool = False,
             description: str = "", requires: Callable[[Config], None] | None = None,
             scores_options: bool = False, reports_conflicts: tuple[str, ...] = ()
             ) -> Callable[[Factory], Factory]:
    """Register the decorated factory as stage `name` of `kind`; returns it unchanged."""
    from faithrag import config, sections  # the core sections, and the registered ones

    label = stage_kind(kind).label  # ValueError for an unknown kind
    if name.lower() == NONE:
        raise ValueError(f"{label} {name!r}: the name means no stage of its kind")
    unknown = set(reports_conflicts) - set(CONFLICT_KINDS)
    if unknown:
        raise ValueError(f"{label} {name!r}: unknown conflict kinds {sorted(unknown)}")
    if section is not None and section not in (*config.CORE_SECTIONS, *sections.registered()):
        raise ValueError(f"{label} {name!r}: no configuration section {section!r}")

    def decorate(factory: Factory) -> Factory:
        if name in _STAGES[kind]:
            raise ValueError(f"{label} {name!r} is registered twice")
        _STAGES[kind][name] = StageSpec(kind, name, factory, section, choices, description,
                                        requires, scores_options, reports_conflicts)
        return factory
    return decorate


def unregister(kind: Kind, name: str) -> None:
    """Remove a registration (for tests and plugins that replace a stage)."""
    _STAGES[kind].pop(name, None)


def load_builtins() -> None:
    """Import the built-in stages (faithrag.methods), once; each registers itself and declares
    its configuration section."""
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        importlib.import_module("faithrag.methods")


def stages(kind: Kind) -> list[StageSpec]:
    """Every registered stage of `kind`, sorted by name."""
    load_builtins()
    return [_STAGES[kind][n] for n in sorted(_STAGES[kind])]


def names(kind: Kind) -> list[str]:
    return [spec.name for spec in stages(kind)]


def stage(kind: Kind, name: str) -> StageSpec:
    """The stage `name` of `kind`; ConfigError naming the registered ones if there is none."""
    load_builtins()
    spec = _STAGES[kind].get(name)
    if spec is None:
        entry = stage_kind(kind)
        raise ConfigError(f"Unknown {entry.label} '{name}'.",
                          f"Choose one of: {', '.join(names(kind))} "
                          f"({entry.flag}, or {entry.config_key} in a config).")
    return spec


def build(kind: Kind, name: str, llm: LLM, config: Config,
          retriever: Retriever | None = None) -> Any:
    """The stage `name` of `kind`, built around `llm` (a single stage outside a pipeline)."""
    return stage(kind, name).build(llm, config, retriever)


def choice_methods() -> frozenset[str]:
    """Generators that answer by picking one of the question's options."""
    return frozenset(spec.name for spec in stages("generator") if spec.choices)


def check_conflict_policy(on_conflict: str, named: list[tuple[Kind, str]]) -> None:
    """ConfigError when `on_conflict` acts on conflicts (any policy but "resolve") but none of the
    stages `named` ((kind, name) pairs) reports a kind it acts on (types.POLICY_KINDS)."""
    def acted_on(spec: StageSpec) -> bool:
        return bool(set(spec.reports_conflicts) & set(POLICY_KINDS))

    if on_conflict == "resolve" or any(acted_on(stage(kind, name)) for kind, name in named):
        return
    others = [f"{entry.flag} {spec.name}" for entry in KINDS for spec in stages(entry.kind)
              if acted_on(spec) and (spec.kind, spec.name) != ("detector", "conflicts")]
    raise ConfigError(f"on_conflict={on_conflict} needs a stage that reports conflicts between "
                      "sources, and this pipeline has none.",
                      "Add --detect conflicts (detect='conflicts' in Python)"
                      + (f", or use {', '.join(others)}" if others else "") + ".")

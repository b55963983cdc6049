"""The one place where every pipeline stage declares itself.

A stage module registers a factory under a kind and a name; everything that lists or checks
stage names (configuration validation, the CLI's help, the server's `/v1/methods`, the
evaluation harness's choice handling, reports) asks this registry instead of keeping its own
list. Adding a stage is writing its module: the built-in ones under `faithrag.methods` are
loaded the first time the registry is asked; a stage defined elsewhere is registered when its
module is imported.

Contract:
- `register(kind, name, ...)` decorates a factory `(llm, config, retriever) -> stage`; a name is
  registered once per kind (a second registration raises ValueError).
- `stage(kind, name)` returns the StageSpec, or raises ConfigError naming the known names.
- `section` names the Config section that configures the stage (None: it reads only the
  shared sections `generation` and `retrieval`).
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

Kind = Literal["generator", "reranker", "verifier", "detector"]
KINDS: tuple[Kind, ...] = ("generator", "reranker", "verifier", "detector")
Factory = Callable[["LLM", "Config", "Retriever | None"], Any]

# How each kind is named to users, and the configuration key / CLI flag that selects it.
LABELS = {"generator": "method", "reranker": "re-ranker", "verifier": "verifier",
          "detector": "conflict detector"}
CONFIG_KEYS = {"generator": "pipeline.method", "reranker": "pipeline.rerank",
               "verifier": "pipeline.verify", "detector": "pipeline.detect"}
FLAGS = {"generator": "--method", "reranker": "--rerank", "verifier": "--verify",
         "detector": "--detect"}


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


_STAGES: dict[str, dict[str, StageSpec]] = {kind: {} for kind in KINDS}
_builtins_loaded = False


def register(kind: Kind, name: str, *, section: str | None = None, choices: bool = False,
             description: str = "", requires: Callable[[Config], None] | None = None,
             scores_options: bool = False, reports_conflicts: tuple[str, ...] = ()
             ) -> Callable[[Factory], Factory]:
    """Register the decorated factory as stage `name` of `kind`; returns it unchanged."""
    from faithrag.config import Config

    if kind not in _STAGES:
        raise ValueError(f"unknown stage kind {kind!r}; one of {', '.join(KINDS)}")
    unknown = set(reports_conflicts) - set(CONFLICT_KINDS)
    if unknown:
        raise ValueError(f"{LABELS[kind]} {name!r}: unknown conflict kinds {sorted(unknown)}")
    if section is not None and section not in Config.model_fields:
        raise ValueError(f"{LABELS[kind]} {name!r}: no configuration section {section!r}")

    def decorate(factory: Factory) -> Factory:
        if name in _STAGES[kind]:
            raise ValueError(f"{LABELS[kind]} {name!r} is registered twice")
        _STAGES[kind][name] = StageSpec(kind, name, factory, section, choices, description,
                                        requires, scores_options, reports_conflicts)
        return factory
    return decorate


def unregister(kind: Kind, name: str) -> None:
    """Remove a registration (for tests and plugins that replace a stage)."""
    _STAGES[kind].pop(name, None)


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        importlib.import_module("faithrag.methods")


def stages(kind: Kind) -> list[StageSpec]:
    """Every registered stage of `kind`, sorted by name."""
    _load_builtins()
    return [_STAGES[kind][n] for n in sorted(_STAGES[kind])]


def names(kind: Kind) -> list[str]:
    return [spec.name for spec in stages(kind)]


def stage(kind: Kind, name: str) -> StageSpec:
    """The stage `name` of `kind`; ConfigError naming the registered ones if there is none."""
    _load_builtins()
    spec = _STAGES[kind].get(name)
    if spec is None:
        raise ConfigError(f"Unknown {LABELS[kind]} '{name}'.",
                          f"Choose one of: {', '.join(names(kind))} "
                          f"({FLAGS[kind]}, or {CONFIG_KEYS[kind]} in a config).")
    return spec


def build(kind: Kind, name: str, llm: LLM, config: Config,
          retriever: Retriever | None = None) -> Any:
    """The stage `name` of `kind`, built around `llm` (a single stage outside a pipeline)."""
    return stage(kind, name).build(llm, config, retriever)


def choice_methods() -> frozenset[str]:
    """Generators that answer by picking one of the question's options."""
    return frozenset(spec.name for spec in stages("generator") if spec.choices)


def check_conflict_policy(on_conflict: str, named: list[tuple[Kind, str]]) -> None:
    """ConfigError when `on_conflict` acts on conflicts ("surface", "abstain") but none of the
    stages `named` ((kind, name) pairs) reports a kind it acts on (types.POLICY_KINDS)."""
    def acted_on(spec: StageSpec) -> bool:
        return bool(set(spec.reports_conflicts) & set(POLICY_KINDS))

    if on_conflict == "resolve" or any(acted_on(stage(kind, name)) for kind, name in named):
        return
    others = [f"{FLAGS[spec.kind]} {spec.name}" for kind in KINDS for spec in stages(kind)
              if acted_on(spec) and (spec.kind, spec.name) != ("detector", "conflicts")]
    raise ConfigError(f"on_conflict={on_conflict} needs a stage that reports conflicts between "
                      "sources, and this pipeline has none.",
                      "Add --detect conflicts (detect='conflicts' in Python)"
                      + (f", or use {', '.join(others)}" if others else "") + ".")

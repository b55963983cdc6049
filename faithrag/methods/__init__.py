"""Method registry: answer generators, re-rankers and verifiers by name.

Each entry is a factory `(llm, config, retriever) -> stage`; a method registers itself here and
nothing else in the pipeline changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.llm.base import LLM
from faithrag.methods.base import Generator, Reranker, Retriever, Verifier
from faithrag.methods.choice_scoring import ChoiceScoring
from faithrag.methods.cot_json import CoTJSON
from faithrag.methods.vanilla import ClosedBook, VanillaRAG

Factory = Callable[[LLM, Config, "Retriever | None"], Any]

GENERATORS: dict[str, Factory] = {
    "vanilla": lambda llm, cfg, retriever: VanillaRAG(llm, max_tokens=cfg.generation.answer_tokens),
    "closed_book": lambda llm, cfg, retriever: ClosedBook(llm,
                                                          max_tokens=cfg.generation.answer_tokens),
    "cot_json": lambda llm, cfg, retriever: CoTJSON(llm, max_tokens=cfg.generation.max_tokens),
    "choice_scoring": lambda llm, cfg, retriever: ChoiceScoring(llm),
}
RERANKERS: dict[str, Factory] = {}
VERIFIERS: dict[str, Factory] = {}


def _build(kind: str, registry: dict[str, Factory], name: str, llm: LLM, config: Config,
           retriever: Retriever | None) -> Any:
    if name not in registry:
        raise ConfigError(f"Unknown {kind} '{name}'.",
                          f"Choose one of: {', '.join(sorted(registry)) or '(none yet)'}.")
    return registry[name](llm, config, retriever)


def build_generator(name: str, llm: LLM, config: Config,
                    retriever: Retriever | None = None) -> Generator:
    return _build("method", GENERATORS, name, llm, config, retriever)


def build_reranker(name: str, llm: LLM, config: Config,
                   retriever: Retriever | None = None) -> Reranker:
    return _build("re-ranker", RERANKERS, name, llm, config, retriever)


def build_verifier(name: str, llm: LLM, config: Config,
                   retriever: Retriever | None = None) -> Verifier:
    return _build("verifier", VERIFIERS, name, llm, config, retriever)

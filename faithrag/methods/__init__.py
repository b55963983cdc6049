"""Method registry: answer generators, re-rankers and verifiers by name.

Each entry is a factory `(llm, config, retriever) -> stage`; a method registers itself here and
nothing else in the pipeline changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from faithrag.config import Config, cache_dir
from faithrag.errors import ConfigError
from faithrag.llm.base import LLM
from faithrag.methods.antisyco import AntiSycophancyVerifier
from faithrag.methods.base import Generator, Reranker, Retriever, Verifier
from faithrag.methods.cfrag import build_cfrag
from faithrag.methods.choice_scoring import ChoiceScoring
from faithrag.methods.cot_json import CoTJSON
from faithrag.methods.crossval import build_crossval
from faithrag.methods.csrag import CSRAG, JsonCache, Paraphraser
from faithrag.methods.listwise import build_listwise
from faithrag.methods.scorer_rerank import build_bi_encoder, build_llm_judge
from faithrag.methods.vanilla import ClosedBook, VanillaRAG

Factory = Callable[[LLM, Config, "Retriever | None"], Any]


def _csrag(llm: LLM, config: Config, answer_mode: str | None = None) -> CSRAG:
    csrag = config.csrag
    if answer_mode:
        csrag = csrag.model_copy(update={"answer_mode": answer_mode})
    root = cache_dir() / "csrag" if config.use_cache else None
    return CSRAG(llm, csrag, config.generation.max_tokens, config.generation.answer_tokens,
                 Paraphraser(llm, csrag.paraphrase_tokens,
                             JsonCache(root / "paraphrases") if root else None),
                 facts_cache=JsonCache(root / "facts") if root and csrag.cache_facts else None)


GENERATORS: dict[str, Factory] = {
    "vanilla": lambda llm, cfg, retriever: VanillaRAG(llm, max_tokens=cfg.generation.answer_tokens),
    "closed_book": lambda llm, cfg, retriever: ClosedBook(llm,
                                                          max_tokens=cfg.generation.answer_tokens),
    "cot_json": lambda llm, cfg, retriever: CoTJSON(llm, max_tokens=cfg.generation.max_tokens),
    "cot_json_scored": lambda llm, cfg, retriever: CoTJSON(llm, cfg.generation.max_tokens,
                                                           scored=True),
    "choice_scoring": lambda llm, cfg, retriever: ChoiceScoring(llm),
    "csrag": lambda llm, cfg, retriever: _csrag(llm, cfg),
    "csrag_choices": lambda llm, cfg, retriever: _csrag(llm, cfg, "choices"),
    "csrag_json_scored": lambda llm, cfg, retriever: _csrag(llm, cfg, "json_scored"),
    "cfrag": build_cfrag,
}
RERANKERS: dict[str, Factory] = {
    "crossval": build_crossval,
    "listwise": build_listwise,
    "bi_encoder": build_bi_encoder,
    "llm_judge": build_llm_judge,
}
VERIFIERS: dict[str, Factory] = {"antisyco": AntiSycophancyVerifier.from_config}


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

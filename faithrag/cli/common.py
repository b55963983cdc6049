"""Options shared by sub-commands, and building config, model and pipeline from them."""

from __future__ import annotations

import argparse
from typing import Any

from faithrag.config import Config
from faithrag.llm import load_llm
from faithrag.llm.base import LLM
from faithrag.methods import build_generator, build_reranker, build_verifier
from faithrag.methods.base import Retriever
from faithrag.pipeline import Pipeline


def add_model_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model")
    g.add_argument("--config", help="TOML configuration file (CLI options override it)")
    g.add_argument("--model", help="preset (default|fast|tiny), a .gguf path, or a server model name")
    g.add_argument("--llm", choices=["llamacpp", "openai", "transformers"],
                   help="backend (default: llamacpp, embedded)")
    g.add_argument("--base-url", help="OpenAI-compatible server URL, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--api-key", help="API key for the server")
    g.add_argument("--tokenizer", help="openai backend: 'server', a preset, a .gguf or tokenizer.json")
    g.add_argument("--n-ctx", type=int, help="context window in tokens")
    g.add_argument("--threads", type=int, help="CPU threads for the embedded model")


def add_method_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("method")
    g.add_argument("--method", help="answer method (vanilla, closed_book, ...)")
    g.add_argument("--rerank", help="re-ranking stage")
    g.add_argument("--verify", help="verification stage")
    g.add_argument("-k", type=int, help="passages to retrieve")


def config_from_args(args: argparse.Namespace) -> Config:
    overrides: dict[str, Any] = {
        "llm.model": getattr(args, "model", None),
        "llm.backend": getattr(args, "llm", None),
        "llm.base_url": getattr(args, "base_url", None),
        "llm.api_key": getattr(args, "api_key", None),
        "llm.tokenizer": getattr(args, "tokenizer", None),
        "llm.n_ctx": getattr(args, "n_ctx", None),
        "llm.n_threads": getattr(args, "threads", None),
        "pipeline.method": getattr(args, "method", None),
        "pipeline.rerank": getattr(args, "rerank", None),
        "pipeline.verify": getattr(args, "verify", None),
        "retrieval.k": getattr(args, "k", None),
    }
    return Config.load(getattr(args, "config", None), overrides)


def build_pipeline(config: Config, llm: LLM, retriever: Retriever | None) -> Pipeline:
    p = config.pipeline
    return Pipeline(
        generator=build_generator(p.method, llm, config, retriever),
        retriever=retriever,
        reranker=build_reranker(p.rerank, llm, config, retriever) if p.rerank else None,
        verifier=build_verifier(p.verify, llm, config, retriever) if p.verify else None,
        k=config.retrieval.k,
    )


def llm_from_config(config: Config) -> LLM:
    return load_llm(config.llm)

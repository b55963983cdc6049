"""Options shared by sub-commands, and building config, model and pipeline from them."""

from __future__ import annotations

import argparse
from typing import Any

from faithrag import registry
from faithrag.config import Config


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
    g.add_argument("--method", help=f"answer method: {', '.join(registry.names('generator'))} "
                   "(default: vanilla)")
    g.add_argument("--rerank", help=f"re-ranking stage: {', '.join(registry.names('reranker'))}")
    g.add_argument("--verify", help=f"verification stage: {', '.join(registry.names('verifier'))}")
    g.add_argument("--detect", help="conflict detector, reports and changes nothing: "
                   f"{', '.join(registry.names('detector'))}")
    g.add_argument("--on-conflict", choices=["resolve", "surface", "abstain"],
                   help="when a stage reports conflicting sources: resolve (the stages decide, "
                   "default), surface (give each reading with its sources), abstain (say the "
                   "evidence conflicts)")
    g.add_argument("--kb", help="trusted knowledge base for --verify antisyco: an index "
                   "directory, lancedb:URI, or a folder of documents (sets antisyco.kb)")
    g.add_argument("-k", type=int, help="passages to retrieve")
    g.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any configuration value, e.g. --set csrag.alpha=-3 (repeatable)")


def parse_set_options(items: list[str]) -> dict[str, Any]:
    """`key=value` pairs; values are TOML literals (-3, true, "x"), else plain strings."""
    from faithrag.config import tomllib
    from faithrag.errors import ConfigError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got '{item}'.",
                              "For example: --set csrag.alpha=-3")
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        out[key.strip()] = value
    return out


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
        "pipeline.detect": getattr(args, "detect", None),
        "pipeline.on_conflict": getattr(args, "on_conflict", None),
        "antisyco.kb": getattr(args, "kb", None),
        "retrieval.k": getattr(args, "k", None),
        **parse_set_options(getattr(args, "set", None) or []),
    }
    return Config.load(getattr(args, "config", None), overrides)

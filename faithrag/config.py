"""Typed configuration, loadable from TOML, with CLI overrides. Invalid values fail eagerly with a
ConfigError that names the key."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class PipelineConfig(_Strict):
    method: str = "vanilla"
    rerank: str | None = None
    verify: str | None = None


class Config(_Strict):
    llm: LLMConfig = LLMConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    generation: GenerationConfig = GenerationConfig()
    pipeline: PipelineConfig = PipelineConfig()
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
        for dotted, value in (overrides or {}).items():
            if value is None:
                continue
            node = data
            *parents, leaf = dotted.split(".")
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = value
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ConfigError(f"Bad config value for '{where}': {first['msg']}",
                              "See README.md, section Configuration, for the allowed values.") from exc

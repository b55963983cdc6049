"""LLM backends behind one protocol (faithrag.llm.base.LLM). Backends are imported lazily."""

from __future__ import annotations

from faithrag.config import LLMConfig
from faithrag.errors import ConfigError
from faithrag.llm.base import BACKENDS, LLM

DEFAULT_N_CTX = 4096  # the embedded backends' window when llm.n_ctx is not set


def load_llm(config: LLMConfig, copies: int = 1) -> LLM:
    """Build the backend named by `config.backend`. `copies` > 1 loads that many copies of an
    embedded llama.cpp model for concurrent callers (faithrag.llm.replicas), each with
    `n_threads` threads (default: the usable cores shared out). Other backends ignore it: a
    server takes concurrent requests itself, and the transformers backend is one model.
    ConfigError when `config` is not an LLMConfig (a model's or backend's name, a whole Config)."""
    if not isinstance(config, LLMConfig):
        setting = "backend" if config in BACKENDS else "model"
        example = (f"load_llm(LLMConfig({setting}={config!r}))" if isinstance(config, str)
                   else "load_llm(config.llm)")
        raise ConfigError(f"load_llm takes an LLMConfig, not {type(config).__name__}.",
                          f"Pass one, e.g. {example}; a whole Config's is config.llm.")
    if config.backend == "llamacpp":
        from faithrag.llm.llamacpp import LlamaCppLLM, usable_cores
        threads = config.n_threads or max(1, usable_cores() // max(1, copies))

        def one() -> LlamaCppLLM:
            return LlamaCppLLM(config.model, n_ctx=config.n_ctx or DEFAULT_N_CTX, n_threads=threads,
                               n_batch=config.n_batch, prefix_cache=config.prefix_cache,
                               lookup_tokens=config.lookup_tokens,
                               lookup_ngram=config.lookup_ngram, constrain=config.constrain)
        if copies <= 1:
            return one()
        from faithrag.llm.replicas import Replicas
        return Replicas([one() for _ in range(copies)])
    if config.backend == "openai":
        from faithrag.llm.openai import OpenAICompatLLM
        return OpenAICompatLLM(
            base_url=config.base_url, model=config.model, api_key=config.api_key,
            tokenizer=config.tokenizer, timeout=config.timeout, max_retries=config.max_retries,
            concurrency=config.concurrency, logit_bias_cap=config.logit_bias_cap,
            context_window=config.n_ctx,  # None: the server's own window
            constrain=config.constrain)
    if config.backend == "transformers":
        from faithrag.llm.transformers import TransformersLLM
        return TransformersLLM(config.model, n_ctx=config.n_ctx or DEFAULT_N_CTX,
                              torch_dtype=config.torch_dtype, constrain=config.constrain)
    from faithrag.llm.fake import FakeLLM
    return FakeLLM(context_window=config.n_ctx or DEFAULT_N_CTX)


__all__ = ["LLM", "load_llm"]

"""Greedy generation calls kept on disk, so that evaluation runs asking the same thing share it.

The re-ranking runs of one set answer each item's QA version from each re-ranker's top passages
(`--answer-top`); whenever two re-rankers put the same passages first in the same order, their
answer prompts are the same. At temperature 0 the embedded backend's results are a function of
the call's arguments (faithrag/llm/llamacpp.py), so a call answered before can be read back: it
is what the model would return again, bit for bit. The key holds the model's weights (sha256),
the backend's settings, the llama.cpp binding's version and every request of the call in order
(within one call a request's numbers depend on the request before it); the request's `purpose`
label is left out. Calls with sampling are not kept. Completions read back are marked `cached`
and keep the seconds they took when they were computed.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from faithrag.config import Config
from faithrag.llm.base import LLM, Completion, GenerationRequest
from faithrag.llm.delegating import DelegatingLLM
from faithrag.methods.csrag.cache import JsonCache, cache_key

# transport settings: they change how a reply travels, never what it is
_TRANSPORT = {"api_key", "timeout", "max_retries", "concurrency"}


def backend_identity(config: Config, model_sha256: str | None) -> dict[str, Any]:
    settings = config.llm.model_dump(exclude=_TRANSPORT)
    try:
        binding = importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        binding = None
    return {"model_sha256": model_sha256, "llm": settings, "llama_cpp_python": binding}


def _request_key(request: GenerationRequest) -> dict[str, Any]:
    fields = asdict(request)
    fields.pop("purpose")
    fields["bias"] = sorted(request.bias.as_dict().items()) if request.bias else None
    return fields


class AnswerCache(DelegatingLLM):
    """An LLM that answers greedy `generate` calls seen before from `root`; everything else
    goes to `llm` unchanged (the combined calls too, so that their numbers stay the backend's)."""

    def __init__(self, llm: LLM, root: str | Path, identity: dict[str, Any]):
        super().__init__(llm)
        self.store = JsonCache(root)
        self.identity = identity

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        requests = list(requests)
        if any(r.temperature > 0 for r in requests):
            return self.llm.generate(requests)
        key = cache_key("generate", self.identity, [_request_key(r) for r in requests])
        kept = self.store.get(key)
        if kept is not None and len(kept.get("completions", ())) == len(requests):
            try:
                return [Completion(**{**c, "cached": True}) for c in kept["completions"]]
            except TypeError:  # written by another version of Completion: compute afresh
                pass
        completions = self.llm.generate(requests)
        self.store.put(key, {"completions": [asdict(c) for c in completions]})
        return completions

"""What the HTTP API serves: one loaded model and retriever, pipelines built on first use per
(method, rerank, verify, k) and reused, and the lock that queues runs on an in-process model."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from faithrag import registry
from faithrag.config import Config
from faithrag.llm.base import LLM
from faithrag.methods.base import Retriever
from faithrag.pipeline import Pipeline
from faithrag.server.ask_request import PipelineChoice, parse_ask_request

BuildPipeline = Callable[[Config, LLM, "Retriever | None"], Pipeline]


class AskService:
    """Answers `/v1/ask` bodies. With `serialize_runs` (an embedded model: llama.cpp decodes
    one sequence at a time and is not thread-safe) one request runs at a time and the others
    queue; a model behind a server takes them concurrently."""

    def __init__(self, config: Config, llm: LLM, retriever: Retriever | None,
                 build_pipeline: BuildPipeline, serialize_runs: bool = True):
        self.config = config
        self.llm = llm
        self.retriever = retriever
        self.defaults = PipelineChoice(config.pipeline.method, config.pipeline.rerank,
                                       config.pipeline.verify, config.retrieval.k)
        self._build_pipeline = build_pipeline
        self._pipelines: dict[PipelineChoice, Pipeline] = {}
        self._pipelines_lock = threading.Lock()
        self._run_lock: AbstractContextManager[Any] = (
            threading.Lock() if serialize_runs else nullcontext())
        self.pipeline(self.defaults)  # a bad default fails at start-up, not on the first request

    def pipeline(self, choice: PipelineChoice) -> Pipeline:
        with self._pipelines_lock:
            if choice not in self._pipelines:
                config = self.config.model_copy(update={
                    "pipeline": self.config.pipeline.model_copy(update={
                        "method": choice.method, "rerank": choice.rerank,
                        "verify": choice.verify}),
                    "retrieval": self.config.retrieval.model_copy(update={"k": choice.k}),
                })
                self._pipelines[choice] = self._build_pipeline(config, self.llm, self.retriever)
            return self._pipelines[choice]

    def ask(self, body: Any) -> dict[str, Any]:
        """The pipeline's result for a request body; raises RequestError on a bad body."""
        request = parse_ask_request(body, self.defaults)
        with self._run_lock:  # building may also load models (a knowledge base's embedder)
            result = self.pipeline(request.choice).run(request.question, request.passages)
        return result.to_dict()

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "model": self.llm.name, "method": self.defaults.method}

    def methods(self) -> dict[str, Any]:
        """The registered stages, for the inspector's selectors, and this server's defaults."""
        return {
            "methods": sorted(registry.names("generator")), "rerankers": sorted(registry.names("reranker")),
            "verifiers": sorted(registry.names("verifier")),
            "defaults": {"method": self.defaults.method, "rerank": self.defaults.rerank,
                         "verify": self.defaults.verify, "k": self.defaults.k},
            "retrieval": self.retriever is not None,
        }

"""What the HTTP API serves: one loaded model and retriever, pipelines built on first use per
(method, rerank, verify, detect, on_conflict, k) and reused, and the lock that queues runs on an
in-process model. A run can be cancelled from another thread (its client has gone, or its time
is up): it then stops at its next model call, or gives up its place in the queue.

    service = AskService(config, llm, retriever, Pipeline.from_parts)
    service.ask(AskBody(question="Who founded X?"), deadline=time.monotonic() + 60)

A chat completion's run also carries its Reply (faithrag.server.reply): the generation that
writes the answer goes through it, and its JSON reply is made inside the same run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from faithrag import registry
from faithrag.config import Config
from faithrag.llm.base import LLM, require_llm
from faithrag.llm.cancel import CancelToken, RunCancelled, cancellable
from faithrag.methods.base import Retriever
from faithrag.pipeline import Pipeline
from faithrag.server.ask_request import ON_CONFLICT, AskBody, PipelineChoice, to_ask_request
from faithrag.server.errors import RequestError
from faithrag.server.reply import Reply, ReplyLLM, replying
from faithrag.server.settings import Limits
from faithrag.server.stages import Stages, registered_stages

BuildPipeline = Callable[[Config, LLM, "Retriever | None"], Pipeline]
QUEUE_POLL_SECONDS = 0.05  # how often a queued run checks whether it was cancelled


class AskService:
    """Answers `/v1/ask` bodies. With `serialize_runs` (an embedded model: llama.cpp decodes
    one sequence at a time and is not thread-safe) one request runs at a time and the others
    queue until their deadline; a model behind a server takes them concurrently."""

    def __init__(self, config: Config, llm: LLM, retriever: Retriever | None,
                 build_pipeline: BuildPipeline, serialize_runs: bool = True,
                 limits: Limits | None = None):
        self.config = config
        self.llm = ReplyLLM(require_llm(llm))  # every pipeline's model calls: cancellable per run
        self.retriever = retriever
        self.limits = limits or Limits()
        self.stages: Stages = registered_stages()
        p = config.pipeline
        self.defaults = PipelineChoice.of({entry.kind: getattr(p, entry.key)
                                           for entry in registry.KINDS},
                                          config.retrieval.k, p.on_conflict)
        self._build_pipeline = build_pipeline
        self._pipelines: dict[PipelineChoice, Pipeline] = {}
        self._pipelines_lock = threading.Lock()
        self._run_lock = threading.Lock() if serialize_runs else None
        self.pipeline(self.defaults)  # a bad default fails at start-up, not on the first request

    def pipeline(self, choice: PipelineChoice) -> Pipeline:
        with self._pipelines_lock:
            if choice not in self._pipelines:
                config = self.config.model_copy(update={
                    "pipeline": self.config.pipeline.model_copy(update={
                        **{entry.key: choice.name(entry.kind) for entry in registry.KINDS},
                        "on_conflict": choice.on_conflict}),
                    "retrieval": self.config.retrieval.model_copy(update={"k": choice.k}),
                })
                self._pipelines[choice] = self._build_pipeline(config, self.llm, self.retriever)
            return self._pipelines[choice]

    def ask(self, body: AskBody, deadline: float | None = None,
            cancel: CancelToken | None = None, reply: Reply | None = None) -> dict[str, Any]:
        """The pipeline's result for a request body (Result.to_dict): `passages` are exactly
        the ones the generator saw and `evidence` says how many were dropped or cut, and why
        (Result.evidence); `conflicts` and `conflict_checks` are the stages' conflict report.
        With `reply`,
        the run's final generation goes through it and `reply.finish` makes the reply before
        the model is let go (its steps are in the trace). Raises RequestError on a bad body,
        or (504) when the run cannot start before `deadline` (time.monotonic()) because others
        hold the model; RunCancelled once `cancel` is cancelled, while queued or at the run's
        next model call (or token, on a backend that streams)."""
        request = to_ask_request(body, self.defaults, self.stages, self.limits)
        if reply is not None:
            reply.begin(request)
        cancel = cancel or CancelToken()
        if self._run_lock is not None:
            self._wait_for_model(deadline, cancel)
        try:  # building may also load models (a knowledge base's embedder)
            with cancellable(cancel), replying(reply):
                result = self.pipeline(request.choice).run(request.question, request.passages)
                if reply is not None:
                    assert result.evidence is not None  # a run always has a generator
                    reply.finish(result, result.evidence.seen, self.llm, self.config)
        finally:
            if self._run_lock is not None:
                self._run_lock.release()
        return result.to_dict()

    def _wait_for_model(self, deadline: float | None, cancel: CancelToken) -> None:
        """Take the run lock, giving up (504) at `deadline` or (RunCancelled) on `cancel`."""
        assert self._run_lock is not None
        while not self._run_lock.acquire(timeout=QUEUE_POLL_SECONDS):
            if cancel.cancelled:
                raise RunCancelled()
            if deadline is not None and time.monotonic() >= deadline:
                raise RequestError(504, "The request waited for the model past its time limit.",
                                   "Other requests hold the model: retry later, or restart the "
                                   "server with a larger --request-timeout.")

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "model": self.llm.name,
                "method": self.defaults.name("generator")}

    def methods(self) -> dict[str, Any]:
        """The registered stages and conflict policies, for the inspector's selectors, and this
        server's defaults. `stages` lists the stage kinds in registry.KINDS order: each one's
        request field (`key`), its field here (`listing`), its `label`, and whether it can be
        left unset (`optional`)."""
        d = self.defaults
        return {
            "stages": [{"key": entry.key, "listing": entry.listing, "label": entry.label,
                        "optional": entry.optional} for entry in registry.KINDS],
            **{entry.listing: list(self.stages[entry.kind]) for entry in registry.KINDS},
            "on_conflict": list(ON_CONFLICT),
            "defaults": {**{entry.key: d.name(entry.kind) for entry in registry.KINDS},
                         "on_conflict": d.on_conflict, "k": d.k},
            "retrieval": self.retriever is not None,
        }

"""Stopping what is left of a run's model work from another thread. A thread cannot be killed, but
every model call goes through the LLM protocol, so a run whose caller has gone (a streaming
client that disconnected, a request past its time limit) stops at its next call:

    llm = CancellableLLM(load_llm(config.llm))   # once, around the loaded model
    token = CancelToken()
    with cancellable(token):                      # in the thread that runs the pipeline
        pipeline.run(question)                    # raises RunCancelled once token.cancel()

The ones after the cancellation are not made; the call under way stops at its next token on a
backend that streams (faithrag.llm.streaming: its `emit` checks the token), and finishes on any
other.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from faithrag.errors import FaithragError
from faithrag.llm.base import LLM, ChoiceRequest, ChoiceScores, Completion, GenerationRequest


class RunCancelled(FaithragError):
    """The run's caller cancelled it: its remaining model calls are not made."""

    def __init__(self) -> None:
        super().__init__("The run was cancelled: its caller has gone.",
                         "Nothing to do; a client that stays connected gets its answer.")


class CancelToken:
    """Set once, from any thread, when a run's remaining model work should stop."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


_current: ContextVar[CancelToken | None] = ContextVar("faithrag_cancel_token", default=None)


@contextmanager
def cancellable(token: CancelToken) -> Iterator[CancelToken]:
    """Model calls made through a CancellableLLM in this context raise RunCancelled once `token`
    is cancelled."""
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)


def check_cancelled() -> None:
    """RunCancelled when the current context's token (if any) is cancelled."""
    token = _current.get()
    if token is not None and token.cancelled:
        raise RunCancelled()


# the optional batched forms a backend may offer beside generate and score_choices
# (faithrag.llm.base): model work too
MODEL_CALLS = frozenset({"generate_then_score", "score_choices_under", "score_choices_many"})


class CancellableLLM:
    """`llm` whose model calls (generation and scoring, batched forms included) first check the
    current CancelToken (see `cancellable`); everything else is `llm`'s own, and so is its
    identity for caches (model_identity)."""

    def __init__(self, llm: LLM):
        self.wrapped = llm

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.wrapped, name)
        if name not in MODEL_CALLS:
            return value

        def checked(*args: Any, **kwargs: Any) -> Any:
            check_cancelled()
            return value(*args, **kwargs)
        return checked

    @property
    def context_window(self) -> int:
        return self.wrapped.context_window

    @property
    def vocab_size(self) -> int:
        return self.wrapped.vocab_size

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        check_cancelled()
        return self.wrapped.generate(requests)

    def score_choices(self, request: ChoiceRequest) -> ChoiceScores:
        check_cancelled()
        return self.wrapped.score_choices(request)

"""A generation's text handed to a listener token by token, while it is decoded:

    def show(text: str) -> bool:      # the reply so far, after each token
        print(text)
        return True                    # False ends the reply here
    with streaming(show):
        llm.generate([request])        # a backend that streams calls `show` after every token

Contract:
- A backend that streams (the embedded llama.cpp backend, the fake LLM) calls `emit(text)`
  after each token it decodes, `text` being the reply so far: what its completion's text would
  be if it ended there, except that it may end in the first characters of a stop string (the
  reply is cut where a whole one appears) or in U+FFFD where a character of several bytes is
  not complete yet. A backend that does not stream never calls it; its caller gets the reply
  whole from `generate`.
- When the listener returns False the backend ends that reply there, its finish_reason being
  "length" as if its token limit had been reached.
- `emit` raises RunCancelled once the current run is cancelled (faithrag.llm.cancel), listener
  or not, so a backend that streams stops a cancelled run at its next token, not only at its
  next call. An exception the listener raises abandons the call likewise.
- The listener belongs to the context (a ContextVar): it hears the generations made in that
  thread inside `streaming`, and none of another thread's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from faithrag.llm.cancel import check_cancelled

Listener = Callable[[str], bool]

_listener: ContextVar[Listener | None] = ContextVar("faithrag_stream_listener", default=None)


@contextmanager
def streaming(listener: Listener) -> Iterator[None]:
    """Generations in this context hand their text to `listener` token by token (see the
    module docstring)."""
    reset = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(reset)


def listening() -> bool:
    """Whether the context has a listener (a backend may then skip building each token's text)."""
    return _listener.get() is not None


def emit(text: str) -> bool:
    """For backends, after each decoded token: `text` to the context's listener; False when the
    reply should end here. RunCancelled when the run is cancelled."""
    check_cancelled()
    listener = _listener.get()
    return True if listener is None else listener(text)

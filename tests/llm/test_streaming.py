"""A generation's text handed to a listener token by token: the fake LLM and the embedded
llama.cpp backend stream, a listener can end a reply, and a cancelled run stops at its next
token."""

from __future__ import annotations

import threading
import time
from itertools import pairwise

import pytest

from faithrag.llm.base import GenerationRequest, user_prompt
from faithrag.llm.cancel import CancellableLLM, CancelToken, RunCancelled, cancellable
from faithrag.llm.fake import FakeLLM
from faithrag.llm.streaming import emit, listening, streaming

REQUEST = GenerationRequest(user_prompt("q?"), max_tokens=64)


def test_the_listener_hears_each_token_and_only_in_its_context():
    heard: list[str] = []
    llm = FakeLLM(default="Aé!")
    with streaming(lambda text: heard.append(text) or True):
        assert listening()
        (completion,) = llm.generate([REQUEST])
    # one byte per token: "é" is two, its first byte shown as U+FFFD until the second arrives
    assert heard == ["A", "A\ufffd", "Aé", "Aé!"]
    assert (completion.text, completion.finish_reason) == ("Aé!", "stop")
    assert not listening() and emit("anything")
    llm.generate([REQUEST])
    assert len(heard) == 4


def test_a_listener_that_says_stop_ends_the_reply_there_as_its_length():
    llm = FakeLLM(default="Canberra is the capital")
    with streaming(lambda text: len(text) < 8):
        (completion,) = llm.generate([REQUEST])
    assert (completion.text, completion.completion_tokens, completion.finish_reason) == (
        "Canberra", 8, "length")


def test_a_cancelled_run_stops_at_its_next_token_not_at_the_end_of_the_call():
    llm = CancellableLLM(FakeLLM(default="x" * 40, token_seconds=0.02))
    token = CancelToken()
    heard: list[str] = []
    threading.Timer(0.2, token.cancel).start()
    started = time.monotonic()
    with cancellable(token), streaming(lambda text: heard.append(text) or True), \
            pytest.raises(RunCancelled):
        llm.generate([REQUEST])
    assert time.monotonic() - started < 0.6  # the whole reply takes 0.8 s
    assert 3 <= len(heard) < 40


@pytest.mark.model
def test_the_embedded_backend_streams_what_it_returns_and_stops_where_told(tiny_gguf):
    from faithrag.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(str(tiny_gguf), n_ctx=1024, n_threads=1)
    request = GenerationRequest(user_prompt("Name three colours."), max_tokens=24)
    (whole,) = llm.generate([request])
    heard: list[str] = []
    with streaming(lambda text: heard.append(text) or True):
        (streamed,) = llm.generate([request])
    assert streamed.text == whole.text == heard[-1]
    assert len(heard) == whole.completion_tokens > 1
    assert all(later.startswith(earlier.rstrip("\ufffd")) for earlier, later in pairwise(heard))
    with streaming(lambda text: len(heard) < 0):  # stop after the first token
        (first,) = llm.generate([request])
    assert (first.completion_tokens, first.finish_reason) == (1, "length")
    assert first.text == heard[0]
    token = CancelToken()
    with cancellable(token), streaming(lambda text: token.cancel() or True), \
            pytest.raises(RunCancelled):
        llm.generate([request])
    (again,) = llm.generate([request])  # the model is usable after a cancelled call
    assert again.text == whole.text

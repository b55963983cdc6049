from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from faithrag.config import LLMConfig
from faithrag.llm import load_llm
from faithrag.llm.base import (
    ChoiceRequest,
    GenerationRequest,
    TokenBias,
    generate_then_score,
    score_choices_many,
    user_prompt,
)
from faithrag.llm.fake import FakeLLM
from faithrag.llm.replicas import Replicas


class Occupancy:
    """How many callers are inside generate at once, and the most there ever were."""

    def __init__(self):
        self.inside = self.most = 0
        self.lock = threading.Lock()

    @contextmanager
    def entered(self):
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            yield
        finally:
            with self.lock:
                self.inside -= 1


class PausingFake(FakeLLM):
    """A fake whose generate runs `pause()` inside the shared occupancy count."""

    def __init__(self, occupancy: Occupancy, pause, **kwargs):
        super().__init__(**kwargs)
        self.occupancy, self.pause = occupancy, pause
        self.closed = False

    def generate(self, requests):
        with self.occupancy.entered():
            self.pause()
        return super().generate(requests)

    def close(self):
        self.closed = True


REQUEST = GenerationRequest(user_prompt("hi"), max_tokens=4)


def test_concurrent_calls_run_on_different_copies_at_once():
    gate, occupancy = threading.Barrier(2), Occupancy()
    copies = [PausingFake(occupancy, lambda: gate.wait(timeout=5), default="ok")
              for _ in range(2)]
    llm = Replicas(copies)
    with ThreadPoolExecutor(max_workers=2) as pool:  # both must be inside to pass the barrier
        texts = list(pool.map(lambda _: llm.generate([REQUEST])[0].text, range(2)))
    assert texts == ["ok", "ok"] and occupancy.most == 2
    assert [len(c.calls) for c in copies] == [1, 1]
    llm.close()
    assert all(c.closed for c in copies)


def test_a_copy_serves_one_caller_at_a_time():
    occupancy = Occupancy()
    copies = [PausingFake(occupancy, lambda: time.sleep(0.01), default="a")]
    llm = Replicas(copies)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda _: llm.generate([REQUEST]), range(8)))
    assert len(copies[0].calls) == 8 and occupancy.most == 1


def test_a_caller_gets_back_the_copy_it_used_last():
    copies = [FakeLLM(default="ok") for _ in range(3)]
    llm = Replicas(copies)
    with llm._serving():  # the first copy is busy, so this thread's call goes to the second
        llm.generate([REQUEST])
    for _ in range(3):  # all are free now: the second again, where its snapshots would be
        llm.generate([REQUEST])
    assert [len(c.calls) for c in copies] == [0, 4, 0]


class ThreadRecordingFake(FakeLLM):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.threads: set[int] = set()

    def generate(self, requests):
        self.threads.add(threading.get_ident())
        return super().generate(requests)


def test_as_many_workers_as_copies_keep_one_copy_each():
    copies = [ThreadRecordingFake(default="ok") for _ in range(2)]
    llm = Replicas(copies)
    workers = [ThreadPoolExecutor(max_workers=1) for _ in range(2)]
    for worker in (0, 1, 1, 0, 0, 1):  # in turn, so that both copies are free at every call
        workers[worker].submit(llm.generate, [REQUEST]).result()
    for worker in workers:
        worker.shutdown()
    assert [len(c.threads) for c in copies] == [1, 1] and copies[0].threads != copies[1].threads


def test_choice_scoring_and_tokenizer_go_through():
    llm = Replicas([FakeLLM(choice_prior=len), FakeLLM(choice_prior=len)])
    request = ChoiceRequest(user_prompt("pick"), ("a", "bbb"))
    assert llm.score_choices(request).best == 1
    biased = llm.score_choices_under(request, [None, TokenBias.from_mapping({ord("a"): 10.0})])
    assert [s.best for s in biased] == [1, 0]
    assert llm.name == "fake" and llm.context_window == 4096
    assert llm.detokenize(llm.tokenize("héllo")) == "héllo"


def test_generate_then_score_runs_both_parts_on_one_copy():
    copies = [FakeLLM(default="ok", choice_prior=len) for _ in range(2)]
    llm = Replicas(copies)
    with llm._serving():  # the first copy is busy: the call must stay on the second
        completion, [scores] = generate_then_score(
            llm, REQUEST, lambda c: ChoiceRequest(user_prompt(c.text), ("a", "bbb")), [None])
    assert completion.text == "ok" and scores.best == 1
    assert len(copies[0].calls) == 0 and len(copies[1].calls) == 2


def test_score_choices_many_runs_on_one_copy():
    copies = [FakeLLM(choice_prior=len) for _ in range(2)]
    llm = Replicas(copies)
    requests = [ChoiceRequest(user_prompt(q), ("a", "bbb")) for q in ("x", "y", "z")]
    with llm._serving():  # the first copy is busy: all three must go to the second
        scores = score_choices_many(llm, requests)
    assert [s.best for s in scores] == [1, 1, 1]
    assert len(copies[0].calls) == 0 and copies[1].calls == requests


def test_copies_of_different_models_are_refused():
    other = FakeLLM()
    other.name = "other"
    with pytest.raises(ValueError, match="copies of one model"):
        Replicas([FakeLLM(), other])
    with pytest.raises(ValueError):
        Replicas([])


@pytest.mark.model
def test_embedded_copies_answer_as_one_model(tiny_gguf):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make setup)")
    config = LLMConfig(model=str(tiny_gguf), n_ctx=512, n_threads=1)
    single, pair = load_llm(config), load_llm(config, copies=2)
    try:
        assert isinstance(pair, Replicas) and len(pair.copies) == 2
        requests = [GenerationRequest(user_prompt(f"Name a {x}."), max_tokens=6, logprobs=True)
                    for x in ("fruit", "colour", "city", "tree")]
        with ThreadPoolExecutor(max_workers=2) as pool:
            together = list(pool.map(lambda r: pair.generate([r])[0], requests))
        alone = [single.generate([r])[0] for r in requests]
        assert [(c.text, c.token_logprobs) for c in together] == \
            [(c.text, c.token_logprobs) for c in alone]
    finally:
        single.close()
        pair.close()

"""Cancelling a run's remaining model work from another thread."""

from __future__ import annotations

import pytest

from faithrag.llm.base import ChoiceRequest, GenerationRequest, model_identity, user_prompt
from faithrag.llm.cancel import CancellableLLM, CancelToken, RunCancelled, cancellable
from faithrag.llm.fake import FakeLLM

REQUEST = GenerationRequest(user_prompt("q?"))


def test_model_calls_stop_once_the_token_is_cancelled_and_only_in_its_context():
    fake = FakeLLM(default="a")
    llm = CancellableLLM(fake)
    token = CancelToken()
    with cancellable(token):
        assert llm.generate([REQUEST])[0].text == "a"
        token.cancel()
        with pytest.raises(RunCancelled):
            llm.generate([REQUEST])
        with pytest.raises(RunCancelled):
            llm.score_choices(ChoiceRequest(user_prompt("q?"), ("x", "y")))
    assert llm.generate([REQUEST])[0].text == "a"  # outside the run: not cancelled
    assert len(fake.calls) == 2


def test_the_wrapper_keeps_the_models_identity_and_its_batched_forms_are_checked():
    class Batched(FakeLLM):
        def score_choices_many(self, requests):
            return [self.score_choices(r) for r in requests]
    fake = Batched(default="a")
    llm = CancellableLLM(fake)
    assert model_identity(llm) == model_identity(fake) and llm.name == "fake"
    assert llm.tokenize("ab") == fake.tokenize("ab") and llm.context_window == 4096
    token = CancelToken()
    token.cancel()
    with cancellable(token), pytest.raises(RunCancelled):
        llm.score_choices_many([ChoiceRequest(user_prompt("q?"), ("x", "y"))])
    assert fake.calls == []

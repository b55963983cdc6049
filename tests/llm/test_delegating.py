from __future__ import annotations

from contextlib import contextmanager

from faithrag.llm.base import (
    LLM,
    ChoiceRequest,
    GenerationRequest,
    TokenBias,
    generate_then_score,
    score_choices_many,
    score_choices_under,
    user_prompt,
)
from faithrag.llm.delegating import DelegatingLLM
from faithrag.llm.fake import FakeLLM

ASK = GenerationRequest(user_prompt("capital?"), max_tokens=8)
PICK = ChoiceRequest(user_prompt("which?"), ("Paris", "Rome"))
BIASES = [None, TokenBias.from_mapping({ord("R"): 50.0})]


def test_every_protocol_call_is_answered_by_the_wrapped_llm():
    inner = FakeLLM([("capital", "Paris")], context_window=1234, choice_prior=len)
    llm = DelegatingLLM(inner)
    reference = FakeLLM([("capital", "Paris")], context_window=1234, choice_prior=len)
    assert isinstance(llm, LLM) and llm.name == inner.name
    assert (llm.context_window, llm.vocab_size) == (1234, reference.vocab_size)
    assert llm.tokenize("ab") == [97, 98] and llm.detokenize([97, 98]) == "ab"
    assert llm.count_chat_tokens(ASK.messages) == reference.count_chat_tokens(ASK.messages)
    assert llm.generate([ASK]) == reference.generate([ASK])
    assert llm.score_choices(PICK) == reference.score_choices(PICK)
    assert score_choices_under(llm, PICK, BIASES) == score_choices_under(reference, PICK, BIASES)
    assert score_choices_many(llm, [PICK, PICK]) == score_choices_many(reference, [PICK, PICK])
    assert generate_then_score(llm, ASK, lambda _: PICK, BIASES) == generate_then_score(
        reference, ASK, lambda _: PICK, BIASES)
    assert inner.calls == reference.calls  # every call reached the wrapped model


def test_combined_calls_use_the_wrapped_backends_own_version():
    class OneCallForMany(FakeLLM):
        def __init__(self):
            super().__init__()
            self.batches = []

        def score_choices_many(self, requests):
            self.batches.append(len(requests))
            return [self.score_choices(r) for r in requests]

    inner = OneCallForMany()
    DelegatingLLM(inner).score_choices_many([PICK, PICK, PICK])
    assert inner.batches == [3]


def test_a_subclass_that_picks_the_serving_model_keeps_tokenizer_questions_on_llm():
    class Alternating(DelegatingLLM):
        def __init__(self, first, second):
            super().__init__(first)
            self.models, self.turn = [first, second], 0

        @contextmanager
        def _serving(self):
            self.turn += 1
            yield self.models[self.turn % 2]

    first = FakeLLM(default="one", context_window=100)
    second = FakeLLM(default="two", context_window=200)
    llm = Alternating(first, second)
    assert [llm.generate([ASK])[0].text for _ in range(3)] == ["two", "one", "two"]
    llm.score_choices_many([PICK, PICK])  # one serving model for the whole call
    assert [type(c) for c in first.calls].count(ChoiceRequest) == 2
    assert llm.context_window == 100 and llm.turn == 4  # asked of `llm`, never served

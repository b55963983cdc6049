import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.errors import ConfigError
from faithrag.llm.base import (
    ChoiceRequest,
    ChoiceScores,
    GenerationRequest,
    Message,
    TokenBias,
    decoding_cap,
    generate_then_score,
    require_llm,
    score_choices_many,
    user_prompt,
)
from faithrag.llm.fake import FakeLLM


def test_from_sets_sums_overlapping_weights_and_drops_zero():
    bias = TokenBias.from_sets([(-1.0, {1, 2, 3}), (3.0, {3, 4}), (1.0, {1})])
    assert bias.as_dict() == {2: -1.0, 3: 2.0, 4: 3.0}  # id 1: -1 + 1 = 0 is dropped


@given(st.dictionaries(st.integers(0, 999), st.floats(-100, 100).filter(lambda v: abs(v) > 1e-3), max_size=50))
def test_dense_matches_mapping(mapping):
    bias = TokenBias.from_mapping(mapping)
    vec = bias.dense(1000)
    assert vec.dtype == np.float32 and vec.shape == (1000,)
    for i, v in mapping.items():
        assert vec[i] == np.float32(v)
    assert np.count_nonzero(vec) == len(mapping)


def test_dense_ignores_ids_beyond_vocab():
    assert np.count_nonzero(TokenBias.from_mapping({5: 1.0, 50: 2.0}).dense(10)) == 1


def test_choice_probabilities_renormalise():
    scores = ChoiceScores(("a", "b"), [np.log(0.2), np.log(0.6)], [1, 1], 5, 0.0)
    assert scores.best == 1
    assert np.allclose(scores.probabilities(), [0.25, 0.75])


def test_generate_then_score_on_a_backend_without_it_generates_then_scores_the_follow_up():
    llm = FakeLLM(default="the reply", choice_prior=len)
    seen = []

    def follow_up(completion):
        seen.append(completion.text)
        return ChoiceRequest(user_prompt("pick"), ("a", "bbb"), answer_prefix=completion.text)

    completion, scores = generate_then_score(
        llm, GenerationRequest(user_prompt("hi")), follow_up,
        [None, TokenBias.from_mapping({ord("a"): 10.0})])
    assert completion.text == "the reply" and seen == ["the reply"]
    assert [s.best for s in scores] == [1, 0]
    assert llm.calls[-1].answer_prefix == "the reply"


def test_score_choices_many_on_a_backend_without_it_scores_each_request_in_order():
    llm = FakeLLM(choice_prior=len)
    requests = [ChoiceRequest(user_prompt("pick"), ("a", "bbb")),
                ChoiceRequest(user_prompt("pick"), ("a", "bbb"),
                              bias=TokenBias.from_mapping({ord("a"): 10.0}))]
    assert [s.best for s in score_choices_many(llm, requests)] == [1, 0]
    assert llm.calls == requests


def test_score_choices_many_uses_the_backends_own_call():
    class OneCall(FakeLLM):
        def score_choices_many(self, requests):
            self.many = list(requests)
            return [self.score_choices(r) for r in requests]

    llm = OneCall(choice_prior=len)
    requests = [ChoiceRequest(user_prompt(q), ("a", "bbb")) for q in ("x", "y")]
    assert len(score_choices_many(llm, requests)) == 2 and llm.many == requests


@pytest.mark.parametrize("build", [
    GenerationRequest, lambda messages, **kw: ChoiceRequest(messages, ("Yes", "No"), **kw)])
def test_a_recurring_prefix_must_lead_the_request(build):
    messages = (Message("system", "Be brief."), Message("user", "Passages: ... Task: rank."))
    build(messages, cache_prefix=1, cache_prefix_text="Passages: ...")
    build(messages, cache_prefix=2)
    with pytest.raises(ValueError, match="between 0 and 2"):
        build(messages, cache_prefix=3)
    with pytest.raises(ValueError, match="must begin the message"):
        build(messages, cache_prefix=1, cache_prefix_text="Task: rank.")
    with pytest.raises(ValueError, match="must begin the message"):
        build(messages, cache_prefix=2, cache_prefix_text="Passages")


def test_a_constrained_structured_reply_may_run_to_three_tokens_per_budget_token_within_the_room():
    structured = GenerationRequest(user_prompt("q"), max_tokens=100, grammar='root ::= "a"')
    assert decoding_cap(structured, constrained=True, room=1000) == 300
    assert decoding_cap(structured, constrained=True, room=180) == 180  # the window's room
    assert decoding_cap(structured, constrained=True, room=50) == 100  # never below max_tokens


def test_an_unconstrained_or_unstructured_reply_keeps_max_tokens():
    structured = GenerationRequest(user_prompt("q"), max_tokens=100, grammar='root ::= "a"')
    assert decoding_cap(structured, constrained=False, room=1000) == 100
    plain = GenerationRequest(user_prompt("q"), max_tokens=100)
    assert decoding_cap(plain, constrained=True, room=1000) == 100


@pytest.mark.parametrize("value, message, hint", [
    ("openai", "not the name 'openai'", "backend='openai'"),
    ("qwen2.5-7b", "not the name 'qwen2.5-7b'", "model='qwen2.5-7b'"),
    (object(), "the object given has no generate", "load_llm(config.llm)"),
])
def test_a_name_or_object_where_a_loaded_model_is_expected_is_refused(value, message, hint):
    with pytest.raises(ConfigError, match=message) as info:
        require_llm(value, "llm")
    assert hint in info.value.hint
    fake = FakeLLM()
    assert require_llm(fake) is fake


def test_cut_at_stop_cuts_at_the_first_stop_string_and_ignores_empty_ones():
    from faithrag.llm.base import cut_at_stop

    assert cut_at_stop("Paris.\nQ: next\n\nA:", ["\n\n", "\nQ:", ""]) == "Paris."
    assert cut_at_stop("Paris", []) == "Paris"

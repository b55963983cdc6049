from functools import partial

import pytest

from faithrag.errors import ConfigError
from faithrag.llm.fake import FakeLLM
from faithrag.methods.choice_scoring import ChoiceScoring
from faithrag.methods.cot_json import CoTJSON
from faithrag.types import Passage, Question, Trace

Q = Question("Capital?", choices=["Sydney", "Canberra"])
P = [Passage("p", "The capital moved to Sydney.")]


def test_cot_json_reads_the_answer_and_reason():
    llm = FakeLLM(default='{"Reason": "the gazette", "Answer": "Sydney"}')
    trace = Trace()
    answer = CoTJSON(llm).generate(Q, P, trace)
    assert (answer.choice_index, answer.reason) == (0, "the gazette")
    assert "JSON" in llm.calls[0].messages[-1].content


def test_cot_json_failure_is_marked():
    answer = CoTJSON(FakeLLM(default="Sydney, I think")).generate(Q, P, Trace())
    assert answer.parse_status == "failed" and answer.choice_index is None


def test_cot_json_scored_scores_the_options_after_the_model_s_reason():
    llm = FakeLLM(default='{"Reason": "the gazette", "Answer": "Melbourne"}',
                  choice_prior=lambda c: 0.0 if c == 'Canberra"' else -2.0)
    trace = Trace()
    answer = CoTJSON(llm, scored=True).generate(Q, P, trace)
    reason_request, score_request = llm.calls
    assert '"Answer"' in reason_request.stop and reason_request.bias is None
    assert score_request.answer_prefix == '{"Reason": "the gazette", "Answer": "'
    assert score_request.choices == ('Sydney"', 'Canberra"')
    assert answer.text == "Canberra" and set(answer.meta["choice_probabilities"]) == set(Q.choices)
    assert (answer.choice_index, answer.reason, answer.parse_status) == (1, "the gazette", "ok")
    assert trace.steps[0].outputs["reason_status"] == "complete"


def test_cot_json_scored_answers_even_when_the_reply_is_cut():
    llm = FakeLLM(default='{"Reason": "' + "very long " * 100, choice_prior=len)
    answer = CoTJSON(llm, max_tokens=32, scored=True).generate(Q, P, Trace())
    assert answer.meta["reason_status"] == "truncated" and answer.text == "Canberra"
    assert llm.calls[1].answer_prefix.endswith('very long", "Answer": "')


def test_choice_scoring_picks_the_most_likely_option():
    llm = FakeLLM(choice_prior=lambda c: 0.0 if c == "Canberra" else -2.0)
    trace = Trace()
    answer = ChoiceScoring(llm).generate(Q, P, trace)
    assert answer.choice_index == 1
    assert answer.meta["choice_probabilities"]["Canberra"] > 0.5
    assert trace.steps[0].llm_calls[0].purpose == "score_choices"


@pytest.mark.parametrize("method", [CoTJSON, ChoiceScoring, partial(CoTJSON, scored=True)])
def test_need_choices(method):
    with pytest.raises(ConfigError):
        method(FakeLLM()).generate(Question("q?"), P, Trace())


@pytest.mark.model
def test_cot_json_scored_with_the_tiny_model(tiny_gguf):
    from faithrag.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(str(tiny_gguf), n_ctx=1024, n_threads=1)
    answer = CoTJSON(llm, max_tokens=48, scored=True).generate(Q, P, Trace())
    assert answer.text in Q.choices and answer.parse_status == "ok"
    assert '"Answer"' not in answer.raw and answer.meta["reason_status"] in {
        "complete", "truncated", "unlabelled"}
    assert sum(answer.meta["choice_probabilities"].values()) == pytest.approx(1.0)

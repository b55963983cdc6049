from functools import partial

import pytest

from faithrag.errors import ConfigError
from faithrag.llm.budget import check_fits
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


def test_cot_json_scored_scores_options_json_escaped():
    llm = FakeLLM(default='{"Reason": "r", "Answer": "x"}')
    question = Question("Which series?", choices=['The "Ashes"', "C:\\Ashes"])
    CoTJSON(llm, scored=True).generate(question, P, Trace())
    assert llm.calls[1].choices == ('The \\"Ashes\\""', 'C:\\\\Ashes"')


class WindowGuardedFake(FakeLLM):
    """Refuses a scoring prompt that does not fit its window, as llama.cpp does."""

    def score_choices(self, request):
        for choice in request.choices:
            check_fits(self.count_chat_tokens(request.messages)
                       + len(self.tokenize(request.answer_prefix + choice)),
                       self.context_window, "prompt with choice")
        return super().score_choices(request)


def test_cot_json_scored_cuts_a_reason_whose_escaped_form_outgrows_its_room():
    reply = 'The gazette says "Sydney".\nSo the capital is Sydney.\n' * 4  # no Reason key
    llm = WindowGuardedFake(default=reply, context_window=1200)
    passages = [Passage("p", "Since 2031 the capital is Sydney. " * 40)]  # fills the window
    answer = CoTJSON(llm, max_tokens=len(reply), scored=True).generate(Q, passages, Trace())
    assert answer.meta["reason_status"] == "trimmed" and answer.text in Q.choices
    assert answer.reason == reply.strip()  # the answer keeps the whole reason


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

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


def test_choice_scoring_picks_the_most_likely_option():
    llm = FakeLLM(choice_prior=lambda c: 0.0 if c == "Canberra" else -2.0)
    trace = Trace()
    answer = ChoiceScoring(llm).generate(Q, P, trace)
    assert answer.choice_index == 1
    assert answer.meta["choice_probabilities"]["Canberra"] > 0.5
    assert trace.steps[0].llm_calls[0].purpose == "score_choices"


@pytest.mark.parametrize("method", [CoTJSON, ChoiceScoring])
def test_need_choices(method):
    with pytest.raises(ConfigError):
        method(FakeLLM()).generate(Question("q?"), P, Trace())

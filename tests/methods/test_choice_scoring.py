from faithrag.llm.base import ChoiceScores
from faithrag.methods.option_scoring import picked_option
from faithrag.types import Step


def scores(logprobs, error=0.0, warnings=()):
    return ChoiceScores(("Darwin", "Sydney"), list(logprobs), [1, 2], 10, 0.1,
                        warnings=list(warnings), probability_error=error)


def test_a_bounded_score_carries_its_largest_error_and_the_backend_warnings():
    step = Step("generate", "csrag")
    every = [scores([-0.1, -2.5], 0.002, ["bounded"]), scores([-0.2, -2.0], 0.004, ["bounded"])]
    answer = picked_option("answer", ["Darwin", "Sydney"], every, step,
                           {"without_bias": None})
    assert answer.text == "Darwin" and answer.meta["probability_error"] == 0.004
    assert step.warnings == ["bounded"]
    assert len(step.llm_calls) == 2


def test_exact_scores_add_no_error_field():
    step = Step("generate", "choice_scoring")
    answer = picked_option("answer", ["Darwin", "Sydney"], [scores([-3.0, -0.5])], step, {})
    assert answer.text == "Sydney" and "probability_error" not in answer.meta
    assert step.warnings == []

"""Request bodies: what is left out takes the server's defaults, what is given is checked against
the registered stages and the limits, before any work."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from faithrag.server.ask_request import AskBody, PipelineChoice, to_ask_request
from faithrag.server.errors import RequestError
from faithrag.server.settings import Limits
from faithrag.server.stages import Stages, registered_stages

DEFAULTS = PipelineChoice("cot_json", "crossval", "antisyco", 4)
STAGES = registered_stages()


def parse(body: dict, limits: Limits | None = None, stages: Stages = STAGES):
    return to_ask_request(AskBody.model_validate(body), DEFAULTS, stages, limits or Limits())


def test_left_out_fields_take_the_defaults_and_passages_mean_no_retrieval():
    request = parse({"question": "  Capital?  "})
    assert request.choice == DEFAULTS
    assert request.question.text == "Capital?" and request.question.choices is None
    assert request.passages is None


def test_given_fields_override_and_null_switches_a_stage_off():
    request = parse({"question": "q?", "method": "csrag", "rerank": None, "verify": None,
                     "k": 9, "choices": ["A", "B"]})
    assert request.choice == PipelineChoice("csrag", None, None, 9)
    assert request.question.choices == ["A", "B"]


def test_passages_are_numbered_unless_named_and_marked_as_from_the_request():
    request = parse({"question": "q?", "passages": [
        {"text": "first"}, {"id": "mine", "title": "T", "text": "second"}, {"text": "third"}]})
    assert [(p.id, p.title, p.text, p.source) for p in request.passages] == [
        ("p1", "", "first", "request"), ("mine", "T", "second", "request"),
        ("p3", "", "third", "request")]


def test_an_empty_passage_list_is_kept_as_no_evidence():
    assert parse({"question": "q?", "passages": []}).passages == []


def test_stage_names_are_checked_against_the_given_registry():
    stages = Stages(methods=("vanilla",), rerankers=("mine",), verifiers=())
    assert parse({"question": "q?", "method": "vanilla", "rerank": "mine", "verify": None},
                 stages=stages).choice == PipelineChoice("vanilla", "mine", None, 4)
    with pytest.raises(RequestError, match="Unknown method 'csrag'") as refused:
        parse({"question": "q?", "method": "csrag"}, stages=stages)
    assert refused.value.hint == "Choose one of: vanilla."


@pytest.mark.parametrize("body, message, flag", [
    ({"question": "q" * 11}, "The question is 11 characters, over the limit of 10.",
     "--max-question-chars"),
    ({"question": "q?", "passages": [{"text": "t"}] * 4},
     "4 passages were sent, over the limit of 3.", "--max-passages"),
    ({"question": "q?", "passages": [{"text": "t"}, {"text": "x" * 21}]},
     "passages[1].text is 21 characters, over the limit of 20.", "--max-passage-chars"),
])
def test_limits_are_a_413_naming_the_option_that_raises_them(body, message, flag):
    limits = Limits(max_question_chars=10, max_passages=3, max_passage_chars=20)
    with pytest.raises(RequestError) as refused:
        parse(body, limits)
    assert (refused.value.status, refused.value.message) == (413, message)
    assert flag in refused.value.hint


@pytest.mark.parametrize("body", [{"question": None}, {"question": "q?", "title": "x"},
                                  {"question": "q?", "choices": [str(i) for i in range(27)]},
                                  {"question": "q?", "k": 1.5}])
def test_ill_typed_bodies_are_refused_by_the_model(body):
    with pytest.raises(ValidationError):
        AskBody.model_validate(body)


def test_the_schema_documents_every_field():
    schema = AskBody.model_json_schema()
    assert set(schema["properties"]) == {"question", "choices", "passages", "method", "rerank",
                                         "verify", "k"}
    assert schema["required"] == ["question"] and schema["additionalProperties"] is False

"""Request bodies: what is left out takes the server's defaults, what is given is checked against
the registered stages and the limits, before any work."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from faithrag.server.ask_request import AskBody, PipelineChoice, to_ask_request
from faithrag.server.errors import RequestError
from faithrag.server.settings import Limits
from faithrag.server.stages import Stages, registered_stages

DEFAULTS = PipelineChoice.of({"generator": "cot_json", "reranker": "crossval",
                             "verifier": "antisyco", "detector": "watch"}, 4, "surface")
STAGES = registered_stages()
DETECTING = {**STAGES, "detector": ("watch", "wide")}


def parse(body: dict, limits: Limits | None = None, stages: Stages = DETECTING):
    return to_ask_request(AskBody.model_validate(body), DEFAULTS, stages, limits or Limits())


def test_left_out_fields_take_the_defaults_and_passages_mean_no_retrieval():
    request = parse({"question": "  Capital?  "})
    assert request.choice == DEFAULTS
    assert request.question.text == "Capital?" and request.question.choices is None
    assert request.passages is None


def test_given_fields_override_and_null_switches_a_stage_off():
    request = parse({"question": "q?", "method": "csrag", "rerank": None, "verify": None,
                     "detect": None, "on_conflict": "abstain", "k": 9, "choices": ["A", "B"]},
                    stages=STAGES)
    assert request.choice == PipelineChoice.of({"generator": "csrag"}, 9, "abstain")
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
    stages: Stages = {"generator": ("vanilla",), "reranker": ("mine",), "verifier": (),
                      "detector": ()}
    assert parse({"question": "q?", "method": "vanilla", "rerank": "mine", "verify": None,
                  "detect": None}, stages=stages).choice == PipelineChoice.of(
        {"generator": "vanilla", "reranker": "mine"}, 4, "surface")
    with pytest.raises(RequestError, match="Unknown method 'csrag'") as refused:
        parse({"question": "q?", "method": "csrag"}, stages=stages)
    assert refused.value.hint == "Choose one of: vanilla."


def test_a_detector_is_chosen_by_name_and_null_or_a_left_out_policy_is_the_default():
    chosen = parse({"question": "q?", "detect": "wide", "on_conflict": None}).choice
    assert (chosen.name("detector"), chosen.on_conflict) == ("wide", "surface")
    assert parse({"question": "q?", "on_conflict": "resolve"}).choice.on_conflict == "resolve"


@pytest.mark.parametrize("field, value, hint", [
    ("detect", "watchful", "Choose one of: watch, wide, or null for none."),
    ("on_conflict", "ignore", "Choose one of: resolve, surface, flag, by_kind, abstain."),
    ("on_conflict", "", "Choose one of: resolve, surface, flag, by_kind, abstain."),
])
def test_an_unknown_detector_or_policy_is_a_400_naming_the_valid_ones(field, value, hint):
    with pytest.raises(RequestError) as refused:
        parse({"question": "q?", field: value})
    assert (refused.value.status, refused.value.message, refused.value.hint) == (
        400, f"Unknown {field} {value!r}.", hint)


def test_a_detector_on_a_server_that_has_none_is_refused_saying_so():
    none: Stages = {"generator": ("vanilla",), "reranker": (), "verifier": (), "detector": ()}
    with pytest.raises(RequestError) as refused:
        parse({"question": "q?", "method": "vanilla", "rerank": None, "verify": None,
               "detect": "watch"}, stages=none)
    assert refused.value.hint == 'None is registered on this server: send "detect": null.'


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
                                         "verify", "detect", "on_conflict", "k"}
    assert schema["properties"]["on_conflict"]["enum"] == ["resolve", "surface", "flag", "by_kind", "abstain", None]
    assert schema["required"] == ["question"] and schema["additionalProperties"] is False

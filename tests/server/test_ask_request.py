"""Request bodies: what is left out takes the server's defaults, what is given is checked."""

from __future__ import annotations

import pytest

from faithrag.server.ask_request import PipelineChoice, parse_ask_request
from faithrag.server.errors import RequestError

DEFAULTS = PipelineChoice("cot_json", "crossval", "antisyco", 4)


def test_left_out_fields_take_the_defaults_and_passages_mean_no_retrieval():
    request = parse_ask_request({"question": "  Capital?  "}, DEFAULTS)
    assert request.choice == DEFAULTS
    assert request.question.text == "Capital?" and request.question.choices is None
    assert request.passages is None


def test_given_fields_override_and_null_switches_a_stage_off():
    request = parse_ask_request({"question": "q?", "method": "csrag", "rerank": None,
                                 "verify": None, "k": 9, "choices": ["A", "B"]}, DEFAULTS)
    assert request.choice == PipelineChoice("csrag", None, None, 9)
    assert request.question.choices == ["A", "B"]


def test_passages_are_numbered_unless_named_and_marked_as_from_the_request():
    request = parse_ask_request({"question": "q?", "passages": [
        {"text": "first"}, {"id": "mine", "title": "T", "text": "second"}, {"text": "third"}]},
        DEFAULTS)
    assert [(p.id, p.title, p.text, p.source) for p in request.passages] == [
        ("p1", "", "first", "request"), ("mine", "T", "second", "request"),
        ("p3", "", "third", "request")]


def test_an_empty_passage_list_is_kept_as_no_evidence():
    assert parse_ask_request({"question": "q?", "passages": []}, DEFAULTS).passages == []


@pytest.mark.parametrize("body", [None, "q?", ["q?"], {"question": None},
                                  {"question": "q?", "title": "x"}])
def test_bad_bodies_are_a_400(body):
    with pytest.raises(RequestError) as refused:
        parse_ask_request(body, DEFAULTS)
    assert refused.value.status == 400 and refused.value.hint

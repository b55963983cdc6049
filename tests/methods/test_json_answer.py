import json

from hypothesis import assume, given
from hypothesis import strategies as st

from faithrag.methods.json_answer import parse_json_answer, read_reason

CHOICES = ["Sydney", "Canberra", "New York City"]


def test_plain_fenced_single_quoted_and_prose_wrapped():
    assert parse_json_answer('{"Reason": "ctx", "Answer": "Sydney"}', CHOICES).choice_index == 0
    fenced = '```json\n{"Reason": "r", "Answer": "canberra."}\n```'
    assert parse_json_answer(fenced, CHOICES).choice_index == 1
    single = "Sure! {'Reason': 'the text says so', 'Answer': 'New York City'} Hope it helps"
    parsed = parse_json_answer(single, CHOICES)
    assert parsed.choice_index == 2 and parsed.reason == "the text says so"
    truncated = '{"Reason": "because", "Answer": "Sydney"'  # model stopped before the brace
    assert parse_json_answer(truncated, CHOICES).choice_index == 0


def test_answers_that_are_not_an_option_fail():
    for text in ['{"Reason": "r", "Answer": "B"}', '{"Answer": "Melbourne"}',
                 '{"Answer": "Sydney or Canberra"}', "Sydney", "", "{}", '{"Reason": "x"}']:
        assert parse_json_answer(text, CHOICES).choice_index is None, text


@given(st.text(max_size=200))
def test_fuzz_never_crashes(text):
    parsed = parse_json_answer(text, CHOICES)
    assert parsed.choice_index is None or 0 <= parsed.choice_index < len(CHOICES)


@given(st.sampled_from(CHOICES), st.text(max_size=60), st.text(max_size=30), st.text(max_size=30))
def test_fuzz_roundtrip_inside_noise(choice, reason, before, after):
    payload = json.dumps({"Reason": reason, "Answer": choice})
    parsed = parse_json_answer(before.replace("{", "") + payload + after.replace("{", ""), CHOICES)
    assert parsed.choice_index == CHOICES.index(choice)


def cut_at_answer(reply: str) -> str:
    """What a generation stopped at the Answer key returns."""
    return reply[: reply.index('"Answer"')]


def test_reason_read_before_the_answer_key():
    assert read_reason('{"Reason": "the gazette says so", ') == ("the gazette says so", "complete")
    assert read_reason("```json\n{'Reason': 'it is \"Sydney\"',\n") == ('it is "Sydney"', "complete")
    assert read_reason('{"Reason": "unescaped "Sydney" kept", }') == ('unescaped "Sydney" kept',
                                                                       "complete")
    assert read_reason('{"Reason": "cut by the token cap') == ("cut by the token cap", "truncated")
    assert read_reason("The context says Sydney.") == ("The context says Sydney.", "unlabelled")
    # stopped right after the key (a reason written "Answer" meets the stop string): no reason
    assert read_reason('{"Reason": ') == ("", "truncated")
    assert read_reason("```json\n{'reason':") == ("", "truncated")
    assert read_reason("The reason:") == ("The reason:", "unlabelled")


@given(st.text(max_size=80), st.booleans())
def test_fuzz_reason_roundtrip(reason, ascii_only):
    # a reason whose JSON form holds the stop string ends the generation inside it
    assume('"Answer"' not in json.dumps(reason, ensure_ascii=ascii_only))
    reply = json.dumps({"Reason": reason, "Answer": "Sydney"}, ensure_ascii=ascii_only)
    assert read_reason(cut_at_answer(reply)) == (reason, "complete")


@given(st.text(max_size=200))
def test_fuzz_reason_never_crashes(text):
    reason, status = read_reason(text)
    assert isinstance(reason, str) and status in {"complete", "truncated", "unlabelled"}


def test_a_reply_cut_inside_its_reason_has_no_answer():
    cut = ('{"Reason": "The gazette says Sydney is the capital since 2031, so the old '
           "answer: 'Canberra' no longer holds and the correct")
    parsed = parse_json_answer(cut, ["Sydney", "Canberra"])
    assert parsed.answer is None and parsed.choice_index is None


def test_single_quoted_and_line_form_replies_are_still_read():
    assert parse_json_answer("{'Reason': 'it is', 'Answer': 'Sydney'}",
                             ["Sydney", "Canberra"]).choice_index == 0
    assert parse_json_answer("Reason: 'it is'\nAnswer: 'Canberra'",
                             ["Sydney", "Canberra"]).choice_index == 1

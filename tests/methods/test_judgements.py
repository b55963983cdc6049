import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.methods.judgements import (
    parse_claims,
    parse_label,
    parse_reference_answer,
    parse_score,
)

LABELS = ("SUPPORTED", "PARTIAL", "UNSUPPORTED")
LABEL_WORD = re.compile(r"supported|partial|unsupported", re.IGNORECASE)
prose = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80).filter(
    lambda t: not LABEL_WORD.search(t))


@pytest.mark.parametrize("text, expected", [
    ("SUPPORT: SUPPORTED", "SUPPORTED"),
    ("**Support:** unsupported.", "UNSUPPORTED"),
    ("UNSUPPORTED", "UNSUPPORTED"),  # SUPPORTED is not read inside UNSUPPORTED
    ("Support: PARTIAL\nThe passage is SUPPORTED elsewhere", "PARTIAL"),  # the field wins
    ("SUPPORTED. The passages are supported by the record.", "SUPPORTED"),
    ("support: not SUPPORTED", None),  # a denied label is unreadable
    ("SUPPORTED or UNSUPPORTED", None),  # two labels, no field
    ("Support: maybe", None),  # the field names no label: not read from the rest
    ("", None),
])
def test_label_examples(text, expected):
    assert parse_label(text, LABELS, "support") == expected


@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_label_is_one_of_the_labels_or_none(text):
    assert parse_label(text, LABELS, "support") in (*LABELS, None)


@given(prose)
def test_text_without_a_label_word_is_unreadable(text):
    assert parse_label(text, LABELS, "support") is None
    assert parse_label(text, LABELS) is None


@given(st.sampled_from(LABELS), prose, prose)
def test_label_field_is_read_through_surrounding_prose(label, before, after):
    text = f"{before}\nSUPPORT: {label.lower()}\n{after}"
    assert parse_label(text, LABELS, "support") == label


@pytest.mark.parametrize("text, expected", [
    ("SCORE: 0.8", 0.8), ("score = .25", 0.25), ("Score: 85%", 0.85), ("SCORE: 8/10", 0.8),
    ("SCORE: 0.7/1", 0.7), ("RELEVANCE: RELEVANT\nSCORE: 1", 1.0), ("**Score**: 0 (none)", 0.0),
    ("0.4", 0.4), ("RELEVANT\n0.9.", 0.9),
    ("SCORE: 7", None),  # above 1 without a scale: a 0-10 score? unreadable
    ("SCORE: -0.3", None), ("SCORE: 150%", None), ("SCORE: high", None),
    ("The score is 0.8 or so", None),  # a number inside prose is not a score line
    ("0.2\n0.9", None),  # two different bare numbers
    ("", None),
])
def test_score_examples(text, expected):
    assert parse_score(text) == (pytest.approx(expected) if expected is not None else None)


@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_score_is_in_unit_interval_or_none(text):
    score = parse_score(text)
    assert score is None or 0.0 <= score <= 1.0


@given(st.text(st.characters(blacklist_categories=("Cs", "Nd")), max_size=200))
def test_text_without_digits_has_no_score(text):
    assert parse_score(text) is None


@given(st.floats(0, 1), prose.filter(lambda t: "\n" not in t and "score" not in t.lower()))
def test_score_field_round_trips(value, noise):
    assert parse_score(f"{noise}\nSCORE: {value:.3f}") == pytest.approx(round(value, 3))


def test_claim_examples():
    text = ("Here are the claims:\n1. Louis Pasteur discovered penicillin.\n"
            "- **Pasteur was French.**\n* Louis Pasteur discovered penicillin.\nClaim 3: x\n"
            "(4) The mould killed bacteria.")
    parsed = parse_claims(text, 2)
    assert parsed.claims == ["Louis Pasteur discovered penicillin.", "Pasteur was French."]
    assert parsed.dropped == 1  # "The mould killed bacteria." is beyond max_claims
    assert parse_claims("- \n***\n12\nok", 3).claims == []


def test_an_intro_line_takes_no_claim_slot_when_the_claims_are_listed():
    text = "Here is the restated answer\n- Louis Pasteur discovered penicillin."
    assert parse_claims(text, 1).claims == ["Louis Pasteur discovered penicillin."]
    assert parse_claims("Louis Pasteur discovered penicillin.", 1).claims == [
        "Louis Pasteur discovered penicillin."]  # an unlisted claim still counts


@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=300), st.integers(1, 5))
def test_claims_are_bounded_non_trivial_lines(text, max_claims):
    parsed = parse_claims(text, max_claims)
    assert len(parsed.claims) <= max_claims and parsed.dropped >= 0
    lines = [re.sub(r"\*\*|__|`", "", line) for line in text.splitlines()]  # markup dropped
    for claim in parsed.claims:
        assert claim and any(claim in line for line in lines)
        assert len(re.findall(r"[^\W\d_]\w*", claim)) >= 2


@given(st.text(st.characters(blacklist_categories=("Cs", "L", "N")), max_size=100))
def test_text_without_words_has_no_claims(text):
    assert parse_claims(text, 3).claims == []


@pytest.mark.parametrize("text, answer, not_stated", [
    ("ANSWER: Alexander Fleming", "Alexander Fleming", False),
    ("Answer: **1956.**", "1956", False),
    ("Alexander Fleming\nbecause the passage says so", "Alexander Fleming", False),
    ("ANSWER: NOT STATED", None, True),
    ("The passages do not mention who discovered it.", None, True),
    ("answer: unknown", None, True),
    ("ANSWER: Unknown.", None, True),
    ("The author is unknown.", None, True),
    ("ANSWER: Tomb of the Unknown Soldier", "Tomb of the Unknown Soldier", False),
])
def test_reference_answer_examples(text, answer, not_stated):
    parsed = parse_reference_answer(text)
    assert parsed is not None and (parsed.text, parsed.not_stated) == (answer, not_stated)


@given(st.text(st.characters(blacklist_categories=("Cs", "L", "N")), max_size=100))
def test_reference_answer_without_words_is_unreadable(text):
    assert parse_reference_answer(text) is None


@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_reference_answer_is_a_single_line_or_not_stated(text):
    parsed = parse_reference_answer(text)
    if parsed is not None:
        assert parsed.not_stated == (parsed.text is None)
        assert parsed.not_stated or ("\n" not in parsed.text and parsed.text.strip())

from cfrag_doubles import COUNTERFACTUALS
from hypothesis import given
from hypothesis import strategies as st

from faithrag.methods.cfrag.parsing import (
    TYPES,
    UNKNOWN_ANSWERS,
    parse_answer_line,
    parse_counterfactuals,
    parse_hypothesis,
)


def test_counterfactual_list_in_the_requested_format():
    parsed = parse_counterfactuals(COUNTERFACTUALS)
    assert parsed.original_answer == "Neil Armstrong"
    assert [c.type for c in parsed.candidates] == list(TYPES)
    assert parsed.candidates[0].question.startswith("Who was the second person")
    assert parsed.candidates[0].answer == "Buzz Aldrin"
    assert parsed.candidates[2].answer is None  # "unknown"
    assert parsed.unparsable_lines == ["Here are the variants."]


def test_counterfactual_decorations_and_missing_answers():
    text = ("Original answer: 1969\n- **Role:** Who directed it? -> Nolan\n"
            "[scope] Which films came out in 1969?\n2) Temporal - When did it end? → 1972\n"
            "Roles are hard to change.\nentity:\n")
    parsed = parse_counterfactuals(text)
    assert parsed.original_answer == "1969"
    assert [(c.type, c.question, c.answer) for c in parsed.candidates] == [
        ("role", "Who directed it?", "Nolan"),
        ("scope", "Which films came out in 1969?", None),
        ("temporal", "When did it end?", "1972")]
    # "Roles ..." is not the type "role"; a type with no question is not a candidate
    assert parsed.unparsable_lines == ["Roles are hard to change.", "entity:"]


def test_counterfactual_garbage_yields_nothing_and_is_counted():
    parsed = parse_counterfactuals("I'm sorry, I can't do that.\n\n")
    assert parsed.candidates == [] and parsed.original_answer is None
    assert len(parsed.unparsable_lines) == 1


@given(st.text(max_size=300))
def test_fuzz_counterfactuals_never_crash_and_only_yield_typed_questions(text):
    parsed = parse_counterfactuals(text)
    for c in parsed.candidates:
        assert c.type in TYPES and len(c.question) >= 3
        assert c.answer is None or c.answer.lower() not in UNKNOWN_ANSWERS


_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789?,", min_size=3,
                 max_size=40).map(str.strip).filter(lambda s: len(s) >= 3)
_ANSWERS = _WORDS.filter(lambda s: s.lower() not in UNKNOWN_ANSWERS)


@given(st.lists(st.tuples(st.sampled_from(TYPES), _WORDS, _ANSWERS), min_size=1, max_size=5),
       _ANSWERS)
def test_fuzz_counterfactual_roundtrip(rows, original):
    text = f"ORIGINAL => {original}\n" + "\n".join(f"{t}: {q} => {a}" for t, q, a in rows)
    parsed = parse_counterfactuals(text)
    assert parsed.original_answer == original
    assert [(c.type, c.question, c.answer) for c in parsed.candidates] == list(rows)


def test_hypothesis_formats():
    h = parse_hypothesis("Answer: Neil Armstrong.\nRationale: passage 1 says he\nstepped first.")
    assert (h.answer, h.rationale) == ("Neil Armstrong", "passage 1 says he stepped first.")
    h = parse_hypothesis("**Answer:**\nParis\n\n**Reason:** the capital")
    assert (h.answer, h.rationale) == ("Paris", "the capital")
    h = parse_hypothesis("Final answer: 1887. Rationale: the history passage.")
    assert (h.answer, h.rationale) == ("1887", "the history passage.")
    assert parse_hypothesis("Answer: Armstrong").rationale == ""
    h = parse_hypothesis("Rationale: passage 2 names\nthe commander.\nAnswer: Neil Armstrong\n"
                         "Answer: Buzz Aldrin")
    assert (h.answer, h.rationale) == ("Neil Armstrong", "passage 2 names the commander.")


def test_hypothesis_without_answer_is_unparsable_and_unknown_is_an_abstention():
    assert parse_hypothesis("Neil Armstrong, because of passage 1").answer is None
    assert parse_hypothesis("Answer:\nRationale: nothing fits").answer is None
    assert parse_hypothesis("").answer is None
    h = parse_hypothesis("Answer: Unknown\nRationale: the passages do not say")
    assert h.answer == "Unknown" and h.abstained
    assert not parse_hypothesis("Answer: Aldrin").abstained


@given(st.text(max_size=300))
def test_fuzz_hypothesis_never_crashes(text):
    h = parse_hypothesis(text)
    assert h.answer is None or h.answer.strip() == h.answer != ""
    assert h.answer is None or "answer" in text.lower()


@given(_ANSWERS, _WORDS, st.booleans())
def test_fuzz_hypothesis_roundtrip(answer, rationale, rationale_first):
    lines = [f"Answer: {answer}", f"Rationale: {rationale}"]
    h = parse_hypothesis("\n".join(lines[::-1] if rationale_first else lines))
    assert h.answer == answer
    assert h.rationale == " ".join(rationale.split())


def test_answer_line():
    assert parse_answer_line("Punk rock\nRationale: passage 2") == "Punk rock"
    assert parse_answer_line("\n**Answer:** Paris.\nmore") == "Paris"
    assert parse_answer_line("") is None
    assert parse_answer_line(" \n\t\n") is None
    assert parse_answer_line("Answer:\nParis") is None  # an empty answer line


@given(st.text(max_size=200))
def test_fuzz_answer_line_comes_from_the_first_line(text):
    answer = parse_answer_line(text)
    first = next((line for line in text.splitlines() if line.strip()), "")
    assert answer is None or (answer == answer.strip() != "" and answer in first.replace("**", "")
                              .replace("__", ""))


@given(_ANSWERS)
def test_fuzz_answer_line_roundtrip(answer):
    assert parse_answer_line(f"{answer}\n\nRationale: anything") == answer
    assert parse_answer_line(f"Answer: {answer}") == answer

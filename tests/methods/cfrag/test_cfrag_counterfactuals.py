import pytest
from cfrag_doubles import COUNTERFACTUALS, QUESTION, KeywordEmbedder

from faithrag.methods.cfrag.counterfactuals import (
    CHANGES,
    Counterfactual,
    as_list,
    counterfactual_requests,
    screen,
    select,
)
from faithrag.methods.cfrag.parsing import TYPES, CounterfactualList, parse_counterfactuals
from faithrag.methods.cfrag.vectors import VectorMemo


def test_filter_keeps_near_misses_with_a_different_answer():
    screened = screen(QUESTION, parse_counterfactuals(COUNTERFACTUALS),
                      VectorMemo(KeywordEmbedder()), 0.7)
    by_type = {c.type: c for c in screened}
    # 5 of the 6 question keywords shared, each vector also has a 0.05 constant: 5.0025/6.0025
    assert by_type["role"].similarity == pytest.approx(5.0025 / 6.0025, abs=1e-5)
    assert by_type["role"].kept and by_type["temporal"].kept
    assert not by_type["entity"].kept and "similarity" in by_type["entity"].check  # Mars: 0.61
    assert not by_type["categorical"].kept and "same answer" in by_type["categorical"].check
    assert not by_type["scope"].kept and "similarity" in by_type["scope"].check


def test_unknown_answers_fall_back_to_the_lexical_check():
    variants = (f"role: {QUESTION.replace('first', 'second')} => unknown\n"
                f"scope: {QUESTION.replace('was', 'is')} => unknown\n"
                f"temporal: {QUESTION}\n")
    parsed = parse_counterfactuals("ORIGINAL => unknown\n" + variants)
    assert parsed.original_answer is None
    checks = {c.type: (c.kept, c.check) for c in screen(
        QUESTION, parsed, VectorMemo(KeywordEmbedder()), 0.7)}
    assert checks["role"] == (True, "answer unknown; a content word changed")
    assert checks["scope"][0] is False and "no content word changed" in checks["scope"][1]
    assert checks["temporal"] == (False, "rejected: same as the question")


def test_duplicates_are_rejected():
    line = f"role: {QUESTION.replace('first', 'second')} => Aldrin"
    parsed = parse_counterfactuals(f"ORIGINAL => Armstrong\n{line}\n{line.replace('role', 'scope')}")
    kept = [c.kept for c in screen(QUESTION, parsed, VectorMemo(KeywordEmbedder()), 0.7)]
    assert kept == [True, False]


def test_selection_prefers_one_per_type_then_similarity():
    def cand(t, sim):
        return Counterfactual(t, f"{t} {sim}", None, sim, True, "")
    screened = [cand("role", 0.9), cand("role", 0.85), cand("temporal", 0.8),
                cand("scope", 0.75), Counterfactual("entity", "x", None, 0.99, False, "rejected")]
    assert [c.question for c in select(screened, 3)] == ["role 0.9", "temporal 0.8", "scope 0.75"]
    assert [c.question for c in select(screened, 4)] == [
        "role 0.9", "role 0.85", "temporal 0.8", "scope 0.75"]
    assert select(screened[-1:], 3) == []


def test_one_request_per_type_plus_the_answer_with_worked_examples_as_chat_turns():
    requests = counterfactual_requests(QUESTION, 40)
    assert len(requests) == 1 + len(TYPES)
    prompts = [r.messages[-1].content for r in requests]
    assert all(p.startswith(f"Question: {QUESTION}") for p in prompts)
    assert all(CHANGES[t][0] in p for t, p in zip(TYPES, prompts[1:]))
    for t, request in zip(TYPES, requests[1:]):
        roles = [m.role for m in request.messages]
        assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
        assert [request.messages[2].content, request.messages[4].content] == list(CHANGES[t][1:])
    assert {r.max_tokens for r in requests} == {40} and {r.stop for r in requests} == {("\n",)}
    # what recurs across questions is marked for the prefix cache: everything but the question
    assert [r.cache_prefix for r in requests] == [1] + [5] * len(TYPES)
    assert len({r.messages[:5] for r in counterfactual_requests("Who wrote Hamlet?", 40)[1:]}
               | {r.messages[:5] for r in requests[1:]}) == len(TYPES)
    assert screen(QUESTION, CounterfactualList(None), VectorMemo(KeywordEmbedder()), 0.7) == []


def test_replies_are_assembled_into_the_parsed_list_format():
    replies = ["Answer: Neil Armstrong\nextra line", "Variant: Who was second? => Buzz Aldrin",
               "nonsense", "Who first stepped onto Mars?", "", "Which Apollo? => 11"]
    parsed = parse_counterfactuals(as_list(replies))
    assert parsed.original_answer == "Neil Armstrong"
    assert [(c.type, c.question, c.answer) for c in parsed.candidates] == [
        ("role", "Who was second?", "Buzz Aldrin"), ("temporal", "nonsense", None),
        ("entity", "Who first stepped onto Mars?", None), ("scope", "Which Apollo?", "11")]
    assert parsed.unparsable_lines == ["categorical:"]

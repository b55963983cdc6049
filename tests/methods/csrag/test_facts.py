from hypothesis import given
from hypothesis import strategies as st

from faithrag.llm.fake import FakeLLM
from faithrag.methods.csrag.facts import MAX_FACTS, extract_facts, parse_facts
from faithrag.types import Question, Trace


def test_hyphen_star_bullet_and_numbered_items_are_facts():
    raw = ("Here are facts:\n- Canberra is the capital.\n* It was chosen in 1908.\n"
           "\u2022 Sydney is larger.\n4. Parliament sits in Canberra.\n5) It has 400k people.\n"
           "In summary, Canberra.")
    facts = parse_facts(raw)
    assert facts.items == ["Canberra is the capital.", "It was chosen in 1908.",
                           "Sydney is larger.", "Parliament sits in Canberra.",
                           "It has 400k people."]
    assert facts.parsed and facts.text.count("\n") == 4


def test_prose_without_a_list_is_no_facts():
    facts = parse_facts("Canberra is the capital of Australia, I believe.")
    assert not facts.parsed and facts.text == ""


def test_at_most_ten_facts_and_no_duplicates():
    raw = "\n".join(f"- fact {i % 12}" for i in range(30))
    facts = parse_facts(raw)
    assert len(facts.items) == MAX_FACTS and len(set(facts.items)) == MAX_FACTS


@given(st.text(max_size=400))
def test_parser_never_fails_and_returns_stripped_lines_of_the_output(raw):
    facts = parse_facts(raw)
    assert len(facts.items) <= MAX_FACTS
    for item in facts.items:
        assert item and item == item.strip() and item in raw


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
                        min_size=1, max_size=40).filter(lambda s: s.strip()), max_size=8))
def test_listed_facts_come_back(facts):
    raw = "\n".join(f"- {f}" for f in facts)
    expected = []
    for f in (f.strip() for f in facts):
        if f not in expected:
            expected.append(f)
    assert parse_facts(raw).items == expected[:MAX_FACTS]


def test_extract_facts_asks_without_context_and_records_the_call():
    llm = FakeLLM(default="- Canberra is the capital of Australia.")
    trace = Trace()
    with trace.step("facts", "csrag") as step:
        facts = extract_facts(llm, Question("Capital of Australia?"), step, max_tokens=64)
    assert facts.items == ["Canberra is the capital of Australia."]
    request = llm.calls[0]
    assert request.max_tokens == 64 and request.purpose == "facts"
    assert "Capital of Australia?" in request.messages[-1].content
    assert trace.steps[0].llm_calls[0].purpose == "facts"


def test_facts_are_cached_per_question_and_model(tmp_path):
    from faithrag.methods.csrag.cache import JsonCache

    cache = JsonCache(tmp_path)
    llm = FakeLLM(default="- Canberra is the capital.")
    trace = Trace()
    for _ in range(2):
        with trace.step("facts", "csrag") as step:
            facts = extract_facts(llm, Question("Capital?"), step, 64, cache)
        assert facts.items == ["Canberra is the capital."]
    assert len(llm.calls) == 1 and trace.steps[1].outputs["cached"] is True
    with trace.step("facts", "csrag") as step:
        extract_facts(llm, Question("Another question?"), step, 64, cache)
    assert len(llm.calls) == 2

from faithrag.llm.fake import FakeLLM
from faithrag.methods.vanilla import ClosedBook, VanillaRAG
from faithrag.types import Passage, Question, Trace


def test_vanilla_puts_passages_in_the_prompt_and_reads_the_first_line():
    llm = FakeLLM([("Sydney", "Answer: Sydney\nbecause the gazette says so")], default="Canberra")
    trace = Trace()
    answer = VanillaRAG(llm).generate(
        Question("What is the capital?"), [Passage("p1", "The capital moved to Sydney.")], trace)
    assert answer.text == "Sydney" and answer.parse_status == "ok"
    assert "<passage" in llm.calls[0].messages[-1].content
    step = trace.steps[0]
    assert step.stage == "generate" and step.llm_calls[0].prompt_tokens > 0


def test_multiple_choice_unparsable_is_counted_not_guessed():
    llm = FakeLLM(default="I am not sure")
    q = Question("Capital?", choices=["Sydney", "Canberra"])
    answer = VanillaRAG(llm).generate(q, [Passage("p", "x")], Trace())
    assert answer.parse_status == "failed" and answer.choice_index is None


def test_multiple_choice_maps_letter_to_option():
    llm = FakeLLM(default="B")
    q = Question("Capital?", choices=["Sydney", "Canberra"])
    answer = ClosedBook(llm).generate(q, [], Trace())
    assert (answer.text, answer.choice_index) == ("Canberra", 1)
    assert "<passage" not in llm.calls[0].messages[-1].content


def test_oversized_evidence_is_truncated_with_a_warning():
    llm = FakeLLM(default="x", context_window=600)
    trace = Trace()
    VanillaRAG(llm, max_tokens=32).generate(Question("q?"), [Passage("p", "word " * 400)], trace)
    assert any("truncated" in w for w in trace.warnings)

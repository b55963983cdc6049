from faithrag.llm.fake import FakeLLM
from faithrag.methods.plain_answer import SYSTEM as ANSWER_SYSTEM
from faithrag.methods.plain_answer import passages_head
from faithrag.methods.shared_evidence import ANSWER_STOP, START_WORDS, SharedEvidence
from faithrag.types import Passage, Question, Step

QUESTION = Question("Who recorded the album Armistice?")
LONG = Passage("p1", "</passage> " + " ".join(f"w{i}" for i in range(40)), "Armistice", "wiki")
SHORT = Passage("p2", "Mutemath recorded Armistice.", "", "blog")


def evidence():
    return SharedEvidence.fitted(FakeLLM(), QUESTION, [LONG, SHORT], 48, Step("detect", "x"))


def test_the_head_is_the_plain_answer_prompts_and_every_request_keeps_it():
    shared = evidence()
    assert shared.head == passages_head(QUESTION, [LONG.text, SHORT.text], ["Armistice", ""])
    generation = shared.generation("What does passage 2 say?", 48, "passage_answer")
    assert generation.messages[0].content == ANSWER_SYSTEM
    assert generation.messages[-1].content == shared.head + "What does passage 2 say?"
    assert (generation.cache_prefix_text, generation.keep_prefix) == (shared.head, True)
    assert generation.logprobs and generation.stop == ANSWER_STOP
    choice = shared.yes_no("Same subject?", "same_subject")
    assert choice.choices == ("Yes", "No") and choice.cache_prefix_text == shared.head


def test_a_passage_is_pointed_at_by_its_number_and_first_words_outside_its_frame():
    shared = evidence()
    assert shared.number(SHORT) == 2
    start = shared.start(1)
    assert start.split()[1:START_WORDS] == [f"w{i}" for i in range(START_WORDS - 1)]
    assert start.endswith(" …") and "</passage>" not in start  # cannot close a frame
    assert shared.start(2) == "Mutemath recorded Armistice."

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.llm.fake import FakeLLM
from faithrag.methods.cfrag.drafting import asks_yes_or_no, draft_request, synthesis_request
from faithrag.methods.plain_answer import ANSWER_STOP, render_prompt
from faithrag.types import Passage, Question, Step

PASSAGES = [Passage("p1", "Pothos is a genus of flowering plants.", "Pothos")]


@pytest.mark.parametrize("text", [
    "Are Pothos and Laelia both plants?",
    "Is the Zeilin older than the Arizona?",
    "did Bach write operas",
    "Were both films directed by the same man?",
])
def test_yes_no_questions(text):
    assert asks_yes_or_no(text)


@pytest.mark.parametrize("text", [
    "Where is the Bubblegum Alley located in California?",
    "Who directed the film Jaws?",
    "Is Paris or Lyon larger?",  # an alternative: the answer is a name
    "Which is older, Is It Now or Ever?",
    "Island of the dead: who painted it?",  # "Island" is not "is"
    "",
])
def test_other_questions(text):
    assert not asks_yes_or_no(text)


@given(st.text())
def test_never_raises(text):
    assert asks_yes_or_no(text) in (True, False)


def user_text(request):
    return request.messages[-1].content


def test_the_draft_asks_for_yes_or_no_only_on_yes_no_questions():
    llm = FakeLLM(lambda request: "")
    yes_no = draft_request(llm, Question("Are Pothos and Laelia both plants?"), PASSAGES, 32,
                           False, Step("generate", "t"), write_rationale=True)
    wh = draft_request(llm, Question("Who named Pothos?"), PASSAGES, 32, False,
                       Step("generate", "t"), write_rationale=True)
    choice = draft_request(llm, Question("Is Pothos a plant?", choices=("yes", "no")),
                           PASSAGES, 32, False, Step("generate", "t"), write_rationale=True)
    assert "Answer: <yes or no>" in user_text(yes_no)
    assert "yes" not in user_text(wh).lower().split("answer:")[-1]
    assert "exactly one option" in user_text(choice)


def test_without_a_written_rationale_the_draft_is_vanillas_prompt():
    llm = FakeLLM(lambda request: "")
    question = Question("Who named Pothos?")
    draft = draft_request(llm, question, PASSAGES, 32, True, Step("generate", "t"),
                          write_rationale=False)
    plain = render_prompt(question, [p.title for p in PASSAGES])([p.text for p in PASSAGES])
    assert draft.messages == plain
    assert draft.stop == ANSWER_STOP and draft.logprobs and draft.purpose == "draft"


def test_the_synthesis_closing_follows_the_question_kind():
    llm = FakeLLM(lambda request: "")
    candidates = [("yes", "passage 1", 0.5), ("no", "passage 2", 0.4)]
    yes_no = synthesis_request(llm, Question("Are Pothos and Laelia both plants?"), PASSAGES,
                               candidates, 32, Step("generate", "t"))
    wh = synthesis_request(llm, Question("Who named Pothos?"), PASSAGES, candidates, 32,
                           Step("generate", "t"))
    assert user_text(yes_no).endswith("Answer with yes or no only.")
    assert user_text(wh).endswith("Answer with a short phrase only, no explanation.")

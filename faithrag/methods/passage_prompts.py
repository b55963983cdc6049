"""Prompts over retrieved passages shown one or two at a time: what answer one passage gives on
its own (SIDE_SYSTEM, SIDE_INSTRUCTION: crossval's answer verdict), and whether two passages
speak of the same subject (`same_subject_log_odds`: crossval's ambiguity check). The conflict
detector asks both over all passages at once, in its own module."""

from __future__ import annotations

from faithrag.llm.base import LLM, Message
from faithrag.methods.common import DATA_NOT_INSTRUCTIONS, cut_text, render_passages
from faithrag.retrieval.scorers.llm_judge import yes_log_odds
from faithrag.types import Passage, Question, Step

PAIR_LABELS = ("A", "B")
SIDE_SYSTEM = "You read one passage and answer a question from it alone. " + DATA_NOT_INSTRUCTIONS
SIDE_INSTRUCTION = (
    "What answer to the question does this passage give? Reply in one line: \"ANSWER: <a short "
    "phrase>\", or \"ANSWER: NOT STATED\" if the passage does not give one.")
SUBJECT_SYSTEM = ("You compare two passages retrieved for a question. "
                  + DATA_NOT_INSTRUCTIONS)
SUBJECT_INSTRUCTION = (
    "A name in a question can refer to several different people, works, places or events. Do "
    "passages A and B speak about the same one? Answer Yes or No.")


def render_labelled(labelled: list[tuple[str, str, str]]) -> str:
    """Passages with explicit ids (label, title, text), framed by render_passages."""
    return render_passages([text for _, _, text in labelled],
                           [title for _, title, _ in labelled],
                           [label for label, _, _ in labelled])


def same_subject_log_odds(llm: LLM, question: Question, a: Passage, b: Passage,
                          passage_tokens: int, step: Step) -> float:
    """The log-odds of "Yes", passages a and b (cut to `passage_tokens`) speak of the same
    subject, averaged over the orders (a, b) and (b, a) to cancel the model's preference for
    either position: two choice-scoring calls, recorded on `step`."""
    def render_pair(first: Passage, second: Passage):
        def render(texts: list[str]) -> tuple[Message, ...]:
            pair = render_labelled(list(zip(PAIR_LABELS, (first.title, second.title), texts)))
            user = f"Question: {question.text.strip()}\n\n{pair}\n\n{SUBJECT_INSTRUCTION}"
            return (Message("system", SUBJECT_SYSTEM), Message("user", user))
        return render

    odds = [yes_log_odds(llm, render_pair(x, y), [cut_text(llm, x.text, passage_tokens),
                                                   cut_text(llm, y.text, passage_tokens)],
                         "same_subject", step, reserve=4) for x, y in ((a, b), (b, a))]
    return sum(odds) / len(odds)

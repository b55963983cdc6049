"""Choice scoring: pick the option with the highest log-probability given the context.

No free text is generated, so there is nothing to mis-parse: the baseline for small models that
break output formats."""

from __future__ import annotations

from faithrag.errors import ConfigError
from faithrag.llm.base import LLM, ChoiceRequest, Message, TokenBias
from faithrag.methods.common import (
    DATA_NOT_INSTRUCTIONS,
    fit,
    render_choices,
    render_passages,
    score_choices,
)
from faithrag.types import Answer, Passage, Question, Step, Trace

SYSTEM = "Answer strictly according to the given context. " + DATA_NOT_INSTRUCTIONS
ANSWER_PREFIX = "Answer: "


def render_prompt(question: Question, titles: list[str]):
    def render(texts: list[str]) -> tuple[Message, ...]:
        user = (f"Context:\n{render_passages(texts, titles)}\n\nQuestion: {question.text.strip()}"
                f"\nOptions:\n{render_choices(question.choices or [])}\n\n"
                "Reply with the text of the correct option.")
        return (Message("system", SYSTEM), Message("user", user))
    return render


def answer_by_scoring(llm: LLM, question: Question, passages: list[Passage], step: Step,
                      bias: TokenBias | None = None) -> Answer:
    choices = tuple(question.choices or ())
    reserve = max(len(llm.tokenize(ANSWER_PREFIX + c)) for c in choices) + 8
    fitted = fit(llm, render_prompt(question, [p.title for p in passages]), passages, reserve, step)
    scores = score_choices(llm, ChoiceRequest(fitted.messages, choices, ANSWER_PREFIX, bias,
                                              purpose="score_choices"), step)
    best = scores.best
    probs = scores.probabilities()
    return Answer(text=choices[best], choice_index=best,
                  meta={"choice_probabilities": dict(zip(choices, probs))})


class ChoiceScoring:
    name = "choice_scoring"

    def __init__(self, llm: LLM):
        self.llm = llm

    def generate(self, question: Question, passages: list[Passage], trace: Trace) -> Answer:
        if not question.choices:
            raise ConfigError("The choice_scoring method needs answer options.",
                              "Pass --choices, or use a multiple-choice dataset.")
        with trace.step("generate", self.name, question=question.text,
                        passages=[p.id for p in passages]) as step:
            answer = answer_by_scoring(self.llm, question, passages, step)
            step.outputs = {"answer": answer.text, **answer.meta}
            return answer

"""Choice scoring: pick the option with the highest log-probability given the context
(faithrag.methods.option_scoring)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from faithrag.llm.base import LLM
from faithrag.methods.common import ChoicesRequiredError
from faithrag.methods.option_scoring import answer_by_scoring
from faithrag.registry import register
from faithrag.types import Answer, Passage, Question, Trace

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.retriever import Retriever


class ChoiceScoring:
    name = "choice_scoring"

    def __init__(self, llm: LLM):
        self.llm = llm

    def generate(self, question: Question, passages: list[Passage], trace: Trace) -> Answer:
        if not question.choices:
            raise ChoicesRequiredError(self.name)
        with trace.step("generate", self.name, question=question.text,
                        passages=[p.id for p in passages]) as step:
            answer = answer_by_scoring(self.llm, question, passages, step)
            step.outputs = {"answer": answer.text, **answer.meta}
            return answer


@register("generator", "choice_scoring", choices=True, scores_options=True,
          description="the option with the highest log-probability")
def build_choice_scoring(llm: LLM, config: Config,
                         retriever: Retriever | None) -> ChoiceScoring:
    return ChoiceScoring(llm)

"""The CSRAG paper's reason-then-JSON answer prompt as stages of their own, without logit control
(faithrag.methods.cot_answer): the fair "same-prompt" baseline for CSRAG, and its scored
variant for small models that break the format."""

from __future__ import annotations

from typing import TYPE_CHECKING

from faithrag.llm.base import LLM
from faithrag.methods.common import ChoicesRequiredError
from faithrag.methods.cot_answer import answer_json, answer_json_scored
from faithrag.registry import register
from faithrag.types import Answer, Passage, Question, Trace

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.retriever import Retriever


class CoTJSON:
    """The CoT-JSON prompt without control; `scored` picks the Answer by scoring the options."""

    def __init__(self, llm: LLM, max_tokens: int = 256, scored: bool = False):
        self.llm = llm
        self.max_tokens = max_tokens
        self.scored = scored
        self.name = "cot_json_scored" if scored else "cot_json"

    def generate(self, question: Question, passages: list[Passage], trace: Trace) -> Answer:
        if not question.choices:
            raise ChoicesRequiredError(self.name)
        with trace.step("generate", self.name, question=question.text,
                        passages=[p.id for p in passages]) as step:
            answer = (answer_json_scored if self.scored else answer_json)(
                self.llm, question, passages, step, self.max_tokens)
            step.outputs = {"answer": answer.text, "reason": answer.reason,
                            "parse_status": answer.parse_status, **answer.meta}
            return answer


@register("generator", "cot_json", choices=True,
          description="the CSRAG paper's reason-then-JSON prompt, no logit control")
def build_cot_json(llm: LLM, config: Config, retriever: Retriever | None) -> CoTJSON:
    return CoTJSON(llm, max_tokens=config.generation.max_tokens)


@register("generator", "cot_json_scored", choices=True, scores_options=True,
          description="cot_json's reason, then the options scored in its Answer slot")
def build_cot_json_scored(llm: LLM, config: Config, retriever: Retriever | None) -> CoTJSON:
    return CoTJSON(llm, config.generation.max_tokens, scored=True)

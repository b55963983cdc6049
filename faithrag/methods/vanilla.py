"""Vanilla RAG: the retrieved passages and the question in one plain prompt
(faithrag.methods.plain_answer), and the closed-book reference point without them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from faithrag.llm.base import LLM, GenerationRequest, Message
from faithrag.methods.common import generate, question_block
from faithrag.methods.plain_answer import (
    ANSWER_STOP,
    FREE_FORM,
    MULTIPLE_CHOICE,
    answer_plain,
    read_answer,
)
from faithrag.registry import register
from faithrag.types import Answer, Passage, Question, Trace

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.retriever import Retriever


class VanillaRAG:
    name = "vanilla"

    def __init__(self, llm: LLM, max_tokens: int = 48):
        self.llm = llm
        self.max_tokens = max_tokens

    def generate(self, question: Question, passages: list[Passage], trace: Trace) -> Answer:
        with trace.step("generate", self.name, question=question.text,
                        passages=[p.id for p in passages]) as step:
            answer = answer_plain(self.llm, question, passages, step, self.max_tokens)
            step.outputs = {"answer": answer.text, "parse_status": answer.parse_status}
            return answer


class ClosedBook:
    """The model's own knowledge, no evidence: the reference point for what it memorised."""

    name = "closed_book"

    def __init__(self, llm: LLM, max_tokens: int = 48):
        self.llm = llm
        self.max_tokens = max_tokens

    def generate(self, question: Question, passages: list[Passage], trace: Trace) -> Answer:
        with trace.step("generate", self.name, question=question.text) as step:
            instruction = MULTIPLE_CHOICE if question.choices else FREE_FORM
            messages = (Message("system", "Answer from your own knowledge."),
                        Message("user", f"{question_block(question)}\n\n{instruction}"))
            request = GenerationRequest(messages, max_tokens=self.max_tokens, stop=ANSWER_STOP,
                                        purpose="answer")
            completion = generate(self.llm, [request], step)[0]
            answer = read_answer(completion.text, question)
            step.outputs = {"answer": answer.text, "parse_status": answer.parse_status}
            return answer


@register("generator", "vanilla", description="passages + question, plain prompt")
def build_vanilla(llm: LLM, config: Config, retriever: Retriever | None) -> VanillaRAG:
    return VanillaRAG(llm, max_tokens=config.generation.answer_tokens)


@register("generator", "closed_book", description="no evidence: what the model memorised")
def build_closed_book(llm: LLM, config: Config, retriever: Retriever | None) -> ClosedBook:
    return ClosedBook(llm, max_tokens=config.generation.answer_tokens)

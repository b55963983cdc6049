"""Vanilla RAG: the retrieved passages and the question in one plain prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from faithrag.llm.base import LLM, GenerationRequest, Message, TokenBias
from faithrag.methods.common import (
    DATA_NOT_INSTRUCTIONS,
    fit,
    generate,
    match_choice,
    question_block,
    render_passages,
)
from faithrag.registry import register
from faithrag.types import PARSE_FAILED, Answer, Passage, Question, Step, Trace

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.retriever import Retriever

SYSTEM = ("You answer questions from the passages you are given. " + DATA_NOT_INSTRUCTIONS)
FREE_FORM = "Answer with a short phrase only, no explanation."
MULTIPLE_CHOICE = "Answer with the text of exactly one option, nothing else."
ANSWER_STOP = ("\n\n",)  # only the first line is read; a blank line ends the answer


def read_answer(raw: str, question: Question) -> Answer:
    """First line of the output, minus an 'Answer:' label; for multiple choice, the option it
    names, or a counted parse failure."""
    text = raw.strip().split("\n", 1)[0].strip()
    if text.lower().startswith("answer:"):
        text = text[len("answer:"):].strip()
    if not question.choices:
        return Answer(text=text, raw=raw)
    idx = match_choice(text, question.choices)
    if idx is None:
        return Answer(text=text, raw=raw, parse_status=PARSE_FAILED)
    return Answer(text=question.choices[idx], choice_index=idx, raw=raw)


def passages_head(question: Question, texts: list[str], titles: list[str]) -> str:
    """The start of the plain prompt's user message: the passages, then the question. A request
    whose messages begin with the system message SYSTEM and this text reads the evidence exactly
    as the plain prompt did, and both mark it as a recurring prefix (`cache_prefix=1`,
    `cache_prefix_text`), so a backend that keeps such prefixes reads it once."""
    return f"Passages:\n{render_passages(texts, titles)}\n\n{question_block(question)}\n\n"


def render_prompt(question: Question, titles: list[str]):
    instruction = MULTIPLE_CHOICE if question.choices else FREE_FORM

    def render(texts: list[str]) -> tuple[Message, ...]:
        user = passages_head(question, texts, titles) + instruction
        return (Message("system", SYSTEM), Message("user", user))
    return render


def answer_plain(llm: LLM, question: Question, passages: list[Passage], step: Step,
                 max_tokens: int, bias: TokenBias | None = None) -> Answer:
    """One short answer from the plain prompt (optionally biased; CSRAG's free-form mode). The
    passages and question are marked as a recurring prefix (see `passages_head`)."""
    titles = [p.title for p in passages]
    fitted = fit(llm, render_prompt(question, titles), passages, max_tokens, step)
    request = GenerationRequest(fitted.messages, max_tokens=max_tokens, stop=ANSWER_STOP,
                                bias=bias, purpose="answer", cache_prefix=1, keep_prefix=True,
                                cache_prefix_text=passages_head(question, fitted.evidence,
                                                                titles))
    return read_answer(generate(llm, [request], step)[0].text, question)


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

"""The plain answer prompt: the passages and the question, then a short answer read from the
first line of the reply. Shared by the `vanilla` stage, CSRAG's free-form mode, CF-RAG's drafts
and the anti-sycophancy verifier's draft."""

from __future__ import annotations

from faithrag.llm.base import LLM, GenerationRequest, Message, TokenBias
from faithrag.methods.common import (
    DATA_NOT_INSTRUCTIONS,
    fit,
    generate,
    match_choice,
    question_block,
    render_passages,
)
from faithrag.types import PARSE_FAILED, Answer, Passage, Question, Step

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

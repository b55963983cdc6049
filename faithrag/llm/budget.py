"""Context-window guard: evidence is truncated to fit, with a recorded warning; the question and
instructions never are."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from faithrag.errors import InputTooLargeError
from faithrag.llm.base import LLM, Message

Render = Callable[[list[str]], tuple[Message, ...]]


@dataclass
class FittedPrompt:
    messages: tuple[Message, ...]
    evidence: list[str]  # what was actually put in the prompt
    warnings: list[str] = field(default_factory=list)


def fit_evidence(llm: LLM, render: Render, evidence: Sequence[str], reserve: int) -> FittedPrompt:
    """Render the prompt with as much of `evidence` (in order) as fits in the context window
    minus `reserve` tokens for the answer. Passages are kept whole while they fit; the first that
    does not is cut at a token boundary; the rest are dropped. Raises InputTooLargeError when
    the prompt does not fit even with no evidence."""
    budget = llm.context_window - reserve
    evidence = list(evidence)
    messages = render(evidence)
    if llm.count_chat_tokens(messages) <= budget:
        return FittedPrompt(messages, evidence)

    if llm.count_chat_tokens(render([])) > budget:
        raise InputTooLargeError(
            f"The question and instructions alone exceed the context window "
            f"({llm.context_window} tokens, {reserve} reserved for the answer).",
            "Shorten the question, use a model with a larger context (n_ctx), "
            "or lower max_tokens.",
        )
    kept: list[str] = []
    for passage in evidence:
        if llm.count_chat_tokens(render(kept + [passage])) <= budget:
            kept.append(passage)
            continue
        ids = llm.tokenize(passage)
        lo, hi = 0, len(ids)  # largest token prefix of this passage that still fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if llm.count_chat_tokens(render(kept + [llm.detokenize(ids[:mid])])) <= budget:
                lo = mid
            else:
                hi = mid - 1
        if lo > 0:
            kept.append(llm.detokenize(ids[:lo]))
        break
    total = sum(len(llm.tokenize(p)) for p in evidence)
    used = sum(len(llm.tokenize(p)) for p in kept)
    warning = (f"evidence truncated to fit the context window: kept {used} of {total} evidence "
               f"tokens ({len(kept)} of {len(evidence)} passages, the last possibly cut)")
    return FittedPrompt(render(kept), kept, [warning])


def check_fits(needed: int, window: int, what: str) -> None:
    """Backends call this before evaluating: they never cut a prompt silently."""
    if needed > window:
        raise InputTooLargeError(
            f"{what} exceeds the context window of {window} tokens.",
            "Fit the evidence with faithrag.llm.budget.fit_evidence, lower max_tokens, "
            "or use a larger n_ctx (up to the model's maximum positions).")

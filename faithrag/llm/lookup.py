"""Prompt-lookup drafts for speculative greedy decoding.

Much of what a RAG model writes is copied: a paraphrase repeats its passage, a JSON "Reason"
quotes the context, an answer names a span. When the last few generated tokens already occurred
earlier in the prompt or the output, the tokens that followed them there are a cheap guess at
what comes next. The backend evaluates the guess in one batch and keeps the part the model's own
greedy picks confirm (faithrag/llm/llamacpp.py); no second model is needed.
"""

from __future__ import annotations

from collections.abc import Sequence


def lookup_draft(history: Sequence[int], ngram: int, max_tokens: int) -> list[int]:
    """Up to `max_tokens` tokens that followed the most recent earlier occurrence of the last
    `ngram` tokens of `history`; empty when they occur nowhere earlier."""
    if max_tokens <= 0 or ngram <= 0 or len(history) <= ngram:
        return []
    tail = list(history[-ngram:])
    end = len(history) - ngram  # an occurrence must start before the tail itself
    for start in range(end - 1, -1, -1):
        if history[start] == tail[0] and list(history[start:start + ngram]) == tail:
            return list(history[start + ngram:start + ngram + max_tokens])
    return []


class LookupDrafter:
    """Drafts for one generation, their length adapted to how much of the last one the model
    confirmed: two more after a draft kept whole, one more than was kept after a rejection, but
    never below `min_tokens`. On a CPU a pass over a few tokens costs more than a pass over one
    (BENCHMARKS.md, section "Prompt-lookup drafts"): a one-token draft pays that for at most one
    token, whereas a four-token draft pays it for up to four."""

    def __init__(self, max_tokens: int, ngram: int, min_tokens: int = 4):
        self.max_tokens = max_tokens
        self.ngram = ngram
        self.min_tokens = min(min_tokens, max_tokens)
        self.size = max_tokens

    def propose(self, history: Sequence[int], budget: int) -> list[int]:
        return lookup_draft(history, self.ngram, min(self.size, budget))

    def kept(self, offered: int, confirmed: int) -> None:
        if confirmed == offered:
            self.size = min(self.max_tokens, self.size + 2)
        else:
            self.size = max(self.min_tokens, confirmed + 1)

"""An LLM that hands every call of the LLM protocol on to another LLM, for wrappers to build on.

`DelegatingLLM` forwards the protocol (`context_window`, `vocab_size`, `tokenize`,
`detokenize`, `count_chat_tokens`, `generate`, `score_choices`) and the combined calls that
faithrag/llm/base.py uses when a backend offers them (`score_choices_under`,
`score_choices_many`, `generate_then_score`) to the wrapped model `llm`, whose `name` it takes.
The combined calls go through the helpers of the same name in faithrag/llm/base.py, so a wrapped
backend without its own version still gets the equivalent separate calls.

A subclass overrides only what it changes: one method (a cache in front of `generate`), or
`_serving`, the model that serves each generation and scoring call (tokenizer questions always
go to `llm`). Example::

    class CountingLLM(DelegatingLLM):
        def __init__(self, llm: LLM):
            super().__init__(llm)
            self.generated = 0

        def generate(self, requests):
            self.generated += len(requests)
            return super().generate(requests)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from faithrag.llm.base import (
    LLM,
    ChoiceRequest,
    ChoiceScores,
    Completion,
    GenerationRequest,
    Message,
    TokenBias,
    generate_then_score,
    score_choices_many,
    score_choices_under,
)


class DelegatingLLM:
    """The LLM protocol, answered by `llm` (see the module docstring)."""

    def __init__(self, llm: LLM):
        self.llm = llm
        self.name = llm.name

    @contextmanager
    def _serving(self) -> Iterator[LLM]:
        """The model that serves one generation or scoring call: `llm`."""
        yield self.llm

    @property
    def context_window(self) -> int:
        return self.llm.context_window

    @property
    def vocab_size(self) -> int:
        return self.llm.vocab_size

    def tokenize(self, text: str) -> list[int]:
        return self.llm.tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.llm.detokenize(ids)

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        return self.llm.count_chat_tokens(messages)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        with self._serving() as llm:
            return llm.generate(requests)

    def score_choices(self, request: ChoiceRequest) -> ChoiceScores:
        with self._serving() as llm:
            return llm.score_choices(request)

    def score_choices_under(self, request: ChoiceRequest,
                            biases: Sequence[TokenBias | None]) -> list[ChoiceScores]:
        with self._serving() as llm:
            return score_choices_under(llm, request, biases)

    def score_choices_many(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceScores]:
        with self._serving() as llm:  # one model for all, so its cache carries over
            return score_choices_many(llm, requests)

    def generate_then_score(self, request: GenerationRequest,
                            follow_up: Callable[[Completion], ChoiceRequest],
                            biases: Sequence[TokenBias | None]
                            ) -> tuple[Completion, list[ChoiceScores]]:
        with self._serving() as llm:  # one model for both, so its cache carries over
            return generate_then_score(llm, request, follow_up, biases)

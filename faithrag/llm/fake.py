"""A deterministic scripted LLM for unit tests of control flow. Results from it are not evidence.

Its tokenizer is byte-level (one id per UTF-8 byte), so token sets and biases are exact and easy
to reason about in tests. It streams (faithrag/llm/streaming.py) one byte-token at a time, each
`token_seconds` after the last, when a listener is set or `token_seconds` is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from faithrag.llm.base import (
    ChoiceRequest,
    ChoiceScores,
    Completion,
    GenerationRequest,
    Message,
    cut_at_stop,
)
from faithrag.llm.streaming import emit, listening

Responder = Callable[[GenerationRequest], str]


class FakeLLM:
    """Answers by rules: the first `(substring, response)` whose substring occurs in the last
    user message wins, else `default`. A callable may be given instead of rules.

    Choice scores are `choice_prior(choice)` plus the mean bias over the choice's bytes, so a
    bias can flip a choice exactly as it would on a real model. Every request is kept in `calls`
    (with its `schema` or `grammar`, so a test can check the structure a stage asked for); the
    reply is the rule's text whatever structure was asked, as from a backend that cannot
    constrain.
    """

    name = "fake"

    def __init__(
        self,
        rules: Sequence[tuple[str, str]] | Responder = (),
        default: str = "",
        choice_prior: Callable[[str], float] | None = None,
        context_window: int = 4096,
        token_seconds: float = 0.0,
    ):
        self._respond = rules if callable(rules) else self._by_rules(list(rules), default)
        self._choice_prior = choice_prior or (lambda choice: 0.0)
        self._context_window = context_window
        self.token_seconds = token_seconds
        self.calls: list[GenerationRequest | ChoiceRequest] = []
        self.generate_calls: list[list[GenerationRequest]] = []  # one entry per generate() batch

    @staticmethod
    def _by_rules(rules: list[tuple[str, str]], default: str) -> Responder:
        def respond(request: GenerationRequest) -> str:
            last_user = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
            return next((resp for pat, resp in rules if pat in last_user), default)
        return respond

    @property
    def context_window(self) -> int:
        return self._context_window

    @property
    def vocab_size(self) -> int:
        return 256

    def tokenize(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def detokenize(self, ids: Sequence[int]) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        return sum(len(self.tokenize(m.content)) + 4 for m in messages)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        out = []
        self.generate_calls.append(list(requests))
        for request in requests:
            self.calls.append(request)
            text = self._respond(request)
            text = cut_at_stop(text, request.stop)
            ids = self.tokenize(text)
            finish = "stop"
            if len(ids) > request.max_tokens:
                text, finish = self.detokenize(ids[: request.max_tokens]), "length"
                ids = ids[: request.max_tokens]
            if self.token_seconds or listening():
                for n in range(1, len(ids) + 1):
                    time.sleep(self.token_seconds)
                    if not emit(self.detokenize(ids[:n])):  # the listener ends it here
                        text, finish, ids = self.detokenize(ids[:n]), "length", ids[:n]
                        break
            out.append(Completion(
                text=text,
                prompt_tokens=self.count_chat_tokens(request.messages),
                completion_tokens=len(ids),
                finish_reason=finish,
                seconds=0.0,
                token_logprobs=[-0.1] * len(ids) if request.logprobs else None,
            ))
        return out

    def score_choices(self, request: ChoiceRequest) -> ChoiceScores:
        self.calls.append(request)
        bias = request.bias.as_dict() if request.bias else {}
        logprobs, counts = [], []
        for choice in request.choices:
            ids = self.tokenize(choice)
            boost = sum(bias.get(i, 0.0) for i in ids) / max(len(ids), 1)
            logprobs.append(self._choice_prior(choice) + boost)
            counts.append(len(ids))
        return ChoiceScores(tuple(request.choices), logprobs, counts,
                            self.count_chat_tokens(request.messages), 0.0)

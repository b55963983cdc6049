"""A framework's chat model as a faithrag LLM, for the stages that only generate text.

The adapters wrap the chat model an app already runs (a LangChain `BaseChatModel`, a LlamaIndex
`LLM`, a Haystack chat generator) in `ChatModelLLM`, so that faithrag's stages and the app use
one model. The framework's chat interface takes messages and returns text, so the wrapper
offers generation only:

- `generate`: each request is one chat call with its messages (system, user, assistant turns as
  given). The reply is cut at the first of the request's stop strings and at its `max_tokens`
  (counted as below; finish reason "length"). The chat model's own settings hold (temperature,
  its own reply limit): faithrag's temperature and seed are not passed on, nor is a request's
  schema or grammar, so every structured request comes back unconstrained with a warning
  saying so and is read by faithrag's tolerant parsers, as on any backend that cannot
  constrain. The token counts of a completion are the chat model's own report when it gives one.
- Tokens are counted locally, since the chat model's tokenizer is not known: a run of up to six
  letters (with the space before it), up to three digits, one other mark, or a run of
  whitespace is one token, close to a BPE tokenizer's count on English text. Ids number these
  pieces in the order the wrapper first meets them; they mean nothing to the chat model.
- No token bias and no option scoring: a request with a bias, and `score_choices`, raise
  RuntimeUnavailableError. `check_text_only(config)` refuses, when a component is built, the
  settings whose stages need them.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from faithrag.config import Config
from faithrag.errors import ConfigError, RuntimeUnavailableError
from faithrag.llm.base import (
    ChoiceRequest,
    ChoiceScores,
    Completion,
    GenerationRequest,
    Message,
    cut_at_stop,
)

DEFAULT_CONTEXT_WINDOW = 4096  # tokens as the wrapper counts them, when the framework says none
PIECES = re.compile(r" ?[^\W\d_]{1,6}| ?\d{1,3}| ?(?:[^\w\s]|_)|\s+(?!\S)|\s+")
CHAT_TEMPLATE_TOKENS = 4  # a message's role markers, as faithrag's FakeLLM counts them
UNCONSTRAINED = ("the framework's chat model cannot constrain its reply: the schema or grammar "
                 "was not applied")
SCORING_BACKENDS = ("llm=faithrag.load_llm(faithrag.LLMConfig(model='default')) (the embedded "
                    "llama.cpp model) or backend='openai', base_url=... (an OpenAI-compatible "
                    "server)")
# per stage (its pipeline key and name): the settings under which it scores options (Yes/No
# probabilities) instead of generating text
NEEDS_SCORING = {("rerank", "crossval"): (("rerank", "verdict", "support"),
                                          ("rerank", "same_subject_check", True))}


@dataclass(frozen=True)
class ChatReply:
    """What one chat call gave: the reply's text and, when the framework reports them, the
    prompt's and the reply's token counts."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


Chat = Callable[[Sequence[Message]], ChatReply]


class ChatModelLLM:
    """The LLM protocol over `chat`, one call of a framework's chat model (see the module
    docstring). `name` identifies the model in traces; `context_window` is the window in the
    wrapper's own token count."""

    def __init__(self, name: str, chat: Chat, context_window: int = DEFAULT_CONTEXT_WINDOW):
        self.name = name
        self._chat = chat
        self._context_window = context_window
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []
        self._lock = threading.Lock()

    @property
    def context_window(self) -> int:
        return self._context_window

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def tokenize(self, text: str) -> list[int]:
        pieces = PIECES.findall(text)
        with self._lock:
            for piece in pieces:
                if piece not in self._ids:
                    self._ids[piece] = len(self._pieces)
                    self._pieces.append(piece)
            return [self._ids[piece] for piece in pieces]

    def detokenize(self, ids: Sequence[int]) -> str:
        with self._lock:
            return "".join(self._pieces[int(i)] for i in ids)

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        return sum(len(PIECES.findall(m.content)) + CHAT_TEMPLATE_TOKENS for m in messages)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        if any(request.bias for request in requests):
            raise RuntimeUnavailableError(
                f"The chat model {self.name} takes no token bias.",
                f"Give the component a faithrag model instead: {SCORING_BACKENDS}.")
        return [self._complete(request) for request in requests]

    def _complete(self, request: GenerationRequest) -> Completion:
        started = time.perf_counter()
        reply = self._chat(request.messages)
        text = cut_at_stop(reply.text, request.stop)
        pieces = PIECES.findall(text)
        finish = "stop"
        if len(pieces) > request.max_tokens:
            text, finish = "".join(pieces[:request.max_tokens]), "length"
        completion_tokens = (reply.completion_tokens if reply.completion_tokens is not None
                             and text == reply.text else min(len(pieces), request.max_tokens))
        prompt_tokens = (reply.prompt_tokens if reply.prompt_tokens is not None
                         else self.count_chat_tokens(request.messages))
        return Completion(text=text, prompt_tokens=prompt_tokens,
                          completion_tokens=completion_tokens, finish_reason=finish,
                          seconds=time.perf_counter() - started,
                          warnings=[UNCONSTRAINED] if request.structured else [])

    def score_choices(self, request: ChoiceRequest) -> ChoiceScores:
        raise RuntimeUnavailableError(
            f"The chat model {self.name} cannot score options.",
            f"Give the component a faithrag model instead: {SCORING_BACKENDS}.")


def check_text_only(config: Config, component: str) -> None:
    """ConfigError when a stage of `config`'s pipeline is set to score options, which a
    framework's chat model cannot do (NEEDS_SCORING); the hint names the faithrag backends that
    can."""
    for (stage_key, name), settings in NEEDS_SCORING.items():
        if getattr(config.pipeline, stage_key) != name:
            continue
        for section, key, value in settings:
            if getattr(getattr(config, section), key) != value:
                continue
            raise ConfigError(
                f"{component} with a framework chat model cannot run {section}.{key}="
                f"{value!r}: that setting scores options, which a chat model cannot.",
                f"Use {SCORING_BACKENDS}; or leave {section}.{key} at its default.")

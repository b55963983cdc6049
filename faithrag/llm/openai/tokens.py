"""Token ids as the server reads them: from a local copy of the served model's tokenizer
(checked once against the server's tokenize endpoint when it has one) or from that endpoint,
whose answers are cached (bounded: TOKENIZE_CACHE_SIZE texts, or id sequences), so a text costs
one request however often a stage asks for it. Also the prompt text a chat becomes, when the
chat template is known (a local GGUF's, or the server's own endpoint)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence

from faithrag.errors import ConfigError, ServerRejectedError
from faithrag.llm.base import Message
from faithrag.llm.openai.detect import PROBE_TEXT
from faithrag.llm.openai.flavour import Flavour
from faithrag.llm.tokenizers import LocalTokenizer

TOKENIZE_CACHE_SIZE = 8192  # texts (or id sequences) whose tokenization each backend keeps


class Tokens:
    """The tokenizer of one backend. `local`: the served model's tokenizer, or None to ask the
    server; `flavour`: the server's flavour (found once by the caller; may raise
    ServerUnreachableError)."""

    def __init__(self, local: LocalTokenizer | None, flavour: Callable[[], Flavour]):
        self.local = local
        self._flavour = flavour
        self._lock = threading.Lock()
        self._checked = False
        # one tokenization per text and one piece per id: bounded caches shared by all callers
        self._tokenize_cached = functools.lru_cache(maxsize=TOKENIZE_CACHE_SIZE)(
            lambda text, special: self._flavour().tokenize(text, special))
        self._detokenize_cached = functools.lru_cache(maxsize=TOKENIZE_CACHE_SIZE)(
            lambda ids: self._flavour().detokenize(ids))

    def ensure(self) -> None:
        """Find the server's tokenize endpoint once; check a local tokenizer against it.
        ConfigError when there is neither, or when they disagree."""
        if self._checked:
            return
        flavour = self._flavour()
        with self._lock:
            if self._checked:
                return
            if self.local is None and not flavour.tokenizes:
                raise ConfigError(
                    f"The server at {flavour.transport.root_url} has no tokenize endpoint "
                    "(tried /tokenize and /extras/tokenize), so tokenizer='server' cannot work.",
                    "Pass the tokenizer of the served model: tokenizer=<preset|model.gguf|"
                    "tokenizer.json>.")
            if self.local is not None and flavour.tokenizes:
                local_ids = self.local.encode(PROBE_TEXT, special=False)
                server_ids = self.server_tokenize(PROBE_TEXT)
                if local_ids != server_ids:
                    raise ConfigError(
                        f"tokenizer '{self.local.name}' does not match the server's: "
                        f"{PROBE_TEXT!r} -> {local_ids[:8]}... locally, {server_ids[:8]}... on "
                        "the server.",
                        "Use tokenizer='server' or the tokenizer of the model the server runs; "
                        "biased token ids would hit the wrong tokens.")
            self._checked = True

    def tokenize(self, text: str) -> list[int]:
        """Ids of `text` without BOS, control-token markup (e.g. "<|im_end|>") read as plain
        text, as local GGUF tokenizers and llama-server (asked to) read it. llama-cpp-python's
        server and vLLM have no switch for it and parse such markup into the control token."""
        self.ensure()
        if self.local is not None:
            return self.local.encode(text, special=False)
        return self.server_tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        """Text of `ids`; the server's answers are cached per id sequence (bounded)."""
        self.ensure()
        ids = tuple(int(i) for i in ids)
        if not ids:
            return ""
        if self.local is not None:
            return self.local.decode(ids)
        if len(ids) == 1:
            piece = self._flavour().piece(ids[0])
            if piece is not None:
                return piece
        return self._detokenize_cached(ids)

    def server_tokenize(self, text: str, special: bool = False) -> list[int]:
        """Ids from the server's tokenizer, one request per distinct (text, special) while it
        stays in the cache; control-token markup ("<|im_end|>") in `text` is parsed only with
        `special` where the server lets us choose (llama-server; vLLM and llama-cpp-python's
        endpoints have no such switch)."""
        return list(self._tokenize_cached(text, special))

    def tokenize_prompt(self, text: str) -> list[int]:
        """Ids of a rendered prompt with control-token markup parsed, as the server reads it."""
        if self.local is not None:
            return self.local.encode(text, special=True)
        return self.server_tokenize(text, special=True)

    def render_chat(self, messages: Sequence[Message]) -> str | None:
        """The prompt text the server builds from `messages`, when we can know it: the local
        tokenizer's template, else the server's own (llama-server's /apply-template)."""
        self.ensure()
        if self.local is not None:
            rendered = self.local.render_chat(messages)
            if rendered is not None:
                return rendered
        return self._flavour().render_chat(messages)

    def count_chat_tokens(self, messages: Sequence[Message]) -> int | None:
        """Exact tokens of `messages` through the chat template when it is known (a local
        GGUF's template, vLLM's /tokenize with messages, llama-server's /apply-template); None
        otherwise."""
        self.ensure()
        if self.local is None:
            counted = self._flavour().count_chat_tokens(messages)
            if counted is not None:
                return counted
        rendered = self.render_chat(messages)
        return None if rendered is None else len(self.tokenize_prompt(rendered))

    def text_before(self, text: str, ids: list[int], k: int) -> str:
        """The prefix of `text` that tokenizes to `ids[:k]` (`ids` are the tokens of `text`);
        ServerRejectedError when there is none."""
        tail = self.detokenize(ids[k:])
        head = text[:len(text) - len(tail)] if tail and text.endswith(tail) else None
        if head is None or self.tokenize_prompt(head) != ids[:k]:
            raise ServerRejectedError(
                f"Could not score the choices: the prompt cannot be cut as text before its "
                f"token {k} ({tail[:20]!r}), so that token cannot be scored on its own.",
                "Score these choices with the embedded backend (--llm llamacpp).")
        return head

    def head_text(self, text: str, ids: list[int]) -> str | None:
        """The prefix of `text` that tokenizes to all of `ids` but the last, if there is one."""
        if len(ids) < 2:
            return None
        try:
            return self.text_before(text, ids, len(ids) - 1)
        except ServerRejectedError:
            return None

"""Tokenizers that run in-process and stand for a served model's tokenizer.

An OpenAI-compatible server takes token ids (`logit_bias`) that must come from the tokenizer
the server runs. When the server cannot tokenize for us, or to save the round trips, a local
copy of that tokenizer is used (faithrag/llm/openai/tokens.py checks it once against the server's):

- ``GGUFTokenizer``: the vocabulary of a GGUF (llama-cpp-python, ``vocab_only=True``), its
  chat template and its trained context length (``<architecture>.context_length``);
- ``HFTokenizer``: a Hugging Face tokenizer.json (the ``tokenizers`` package), no chat template;
- ``load_tokenizer(spec)``: "server" (None: ask the server), a preset name, a .gguf path or a
  tokenizer.json path; anything else is a ConfigError.

Example::

    tokenizer = load_tokenizer("tiny")  # the tiny preset's GGUF vocabulary
    ids = tokenizer.encode("Paris", special=False)
    assert tokenizer.decode(ids) == "Paris"
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from faithrag.errors import ConfigError, MissingExtraError
from faithrag.llm.base import Message
from faithrag.llm.models import PRESETS, resolve_model


class LocalTokenizer(Protocol):
    """A tokenizer that runs in-process and must match the server's."""

    name: str
    vocab_size: int
    context_length: int | None  # the model's trained context window, when the file says it

    def encode(self, text: str, special: bool) -> list[int]:
        """Ids of `text`, no BOS; `special` parses control-token markup such as <|im_start|>."""
        ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def render_chat(self, messages: Sequence[Message]) -> str | None:
        """The prompt text of `messages` under the model's chat template, or None if unknown."""
        ...


class GGUFTokenizer:
    """The vocabulary of a GGUF (llama-cpp-python, `vocab_only=True`) and its chat template,
    rendered as llama-cpp-python's server renders it (Jinja2ChatFormatter; for the three exact
    templates it maps to built-in formats, chatml/mistral-instruct/llama-3, whitespace may
    differ)."""

    def __init__(self, path: Path):
        try:
            import llama_cpp
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise MissingExtraError(f"The GGUF tokenizer '{path}'", "llamacpp",
                                    "Or use --tokenizer server, or a tokenizer.json.") from exc
        self.name = str(path)
        self._llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.vocab_size = int(self._llama.n_vocab())
        metadata = self._llama.metadata
        length = metadata.get(f"{metadata.get('general.architecture', 'llama')}.context_length")
        self.context_length = int(length) if length and str(length).isdigit() else None
        template = self._llama.metadata.get("tokenizer.chat_template")
        self._formatter = None
        if template:
            bos, eos = self._llama.token_bos(), self._llama.token_eos()
            text = self._llama._model.token_get_text
            self._formatter = Jinja2ChatFormatter(
                template=template,
                bos_token=text(bos) if bos != -1 else "",
                eos_token=text(eos) if eos != -1 else "",
                add_generation_prompt=True,
            )

    def encode(self, text: str, special: bool) -> list[int]:
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    def decode(self, ids: Sequence[int]) -> str:
        return self._llama.detokenize(list(ids)).decode("utf-8", errors="replace")

    def render_chat(self, messages: Sequence[Message]) -> str | None:
        if self._formatter is None:
            return None
        chat = [{"role": m.role, "content": m.content} for m in messages]
        return self._formatter(messages=chat).prompt


class HFTokenizer:
    """A Hugging Face tokenizer.json (the `tokenizers` package). No chat template: chat token
    counts are approximate."""

    def __init__(self, path: Path):
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingExtraError(f"The tokenizer '{path}'", "dense",
                                    "Or use --tokenizer server.") from exc

        self.name = str(path)
        self._tok = Tokenizer.from_file(str(path))
        self.vocab_size = int(self._tok.get_vocab_size(with_added_tokens=True))
        self.context_length = None  # tokenizer.json does not say it

    def encode(self, text: str, special: bool) -> list[int]:
        # tokenizers always parses added (special) tokens in text; `special` cannot switch it off
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def render_chat(self, messages: Sequence[Message]) -> str | None:
        return None


def load_tokenizer(spec: str) -> LocalTokenizer | None:
    if spec == "server":
        return None
    path = Path(spec).expanduser()
    if spec in PRESETS or path.suffix == ".gguf":
        return GGUFTokenizer(resolve_model(spec))
    if path.suffix == ".json" and path.is_file():
        return HFTokenizer(path)
    raise ConfigError(
        f"tokenizer '{spec}' is neither 'server', a preset ({', '.join(PRESETS)}), a .gguf file "
        "nor an existing tokenizer.json.",
        "Use tokenizer='server' when the server has a tokenize endpoint, otherwise the GGUF or "
        "tokenizer.json of the model the server runs.")

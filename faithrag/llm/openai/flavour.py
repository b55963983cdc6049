"""A server flavour: what one kind of OpenAI-compatible server offers beyond the OpenAI API, and
what it needs sent. The backend finds its server's flavour once (faithrag.llm.openai.detect)
and asks it, instead of testing which server it is at every call.

`Flavour` itself is the OpenAI API as api.openai.com serves it, and the flavour of any server
that is not recognised (SGLang, unless it offers vLLM's tokenize endpoint): no tokenize
endpoints (pass the served model's tokenizer), no chat template, no context window reported
beyond /v1/models, only fields OpenAI knows (it refuses others), and at most 300 `logit_bias`
entries (`logit_bias_cap=300`). The other flavours (vllm.py, llama_server.py,
llama_cpp_python.py) override what their server does differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithrag.llm.base import Message
from faithrag.llm.openai.transport import Transport


class Flavour:
    """The OpenAI API, and what every flavour answers (see the module docstring)."""

    name = "openai"
    # tokenize and detokenize endpoints (`tokenize`, `detokenize`)
    tokenizes = False
    # the server reads a prompt after the longest prefix it shares with what the previous
    # request left (llama.cpp's servers), so scoring requests are sent after `empty_cache_reads`
    holds_prompts = False
    # top log-probs name tokens "token_id:N" when `token_id_fields` are sent
    lists_token_ids = False

    def __init__(self, transport: Transport, model: str, context_window: int | None = None):
        self.transport = transport
        self.model = model
        self.context_window = context_window  # as the server reported it while probed

    def plain_decoding(self) -> dict[str, float]:
        """Fields that switch off what the engine adds to greedy decoding by default, so that it
        picks the model's own argmax as the embedded backend does; sent with every (chat)
        completion request."""
        return {}

    def token_id_fields(self) -> dict[str, Any]:
        """Fields asking for log-probs keyed by token id instead of text."""
        return {}

    def tokenize(self, text: str, special: bool) -> tuple[int, ...]:
        """Ids of `text` without BOS from the server's tokenizer (flavours that `tokenizes`);
        control-token markup is parsed only with `special`, where the server has a switch."""
        raise NotImplementedError(f"{self.name} has no tokenize endpoint")

    def detokenize(self, ids: tuple[int, ...]) -> str:
        """Text of `ids` from the server (flavours that `tokenizes`)."""
        raise NotImplementedError(f"{self.name} has no detokenize endpoint")

    def piece(self, token: int) -> str | None:
        """The text of one token when the server sent it already (no request), else None."""
        return None

    def render_chat(self, messages: Sequence[Message]) -> str | None:
        """The prompt text the server's chat template makes of `messages`, when it says."""
        return None

    def count_chat_tokens(self, messages: Sequence[Message]) -> int | None:
        """Tokens of `messages` through the chat template, when the server counts them."""
        return None

    def read_context_window(self) -> int | None:
        """The context window from an endpoint of this flavour's own, if it has one."""
        return None

    def empty_cache_reads(self, text: str | None) -> list[dict[str, Any]]:
        """The /v1/completions requests (their prompt fields; each sent with max_tokens=1) that
        leave a server which `holds_prompts` holding `text` read from an empty cache, or (None)
        holding nothing a prompt can share. Only asked of such flavours."""
        raise NotImplementedError(f"{self.name} does not hold prompts")

"""llama.cpp's own server, `llama-server`.

POST /tokenize (with `with_pieces`, each id's text too), /detokenize and /apply-template (the
chat template) at the root; the context window is GET /props
`default_generation_settings.n_ctx`; /v1/completions answers log-probs in the chat shape, with
token ids (faithrag.llm.openai.replies); no prompt log-probs with echo (only the generated
tokens'). Its repeat penalty is switched off for plain decoding. It reads a prompt after the
prefix it shares with what the previous request left; a request with `cache_prompt` false reads
its prompt from an empty cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithrag.llm.base import Message
from faithrag.llm.openai.flavour import Flavour
from faithrag.llm.openai.replies import messages_json
from faithrag.llm.openai.transport import Transport


class LlamaServer(Flavour):
    name = "llama-server"
    tokenizes = True
    holds_prompts = True

    def __init__(self, transport: Transport, model: str, context_window: int | None = None):
        super().__init__(transport, model, context_window)
        self._pieces: dict[int, str] = {}  # single-id texts the server sent with its ids

    def plain_decoding(self) -> dict[str, float]:
        return {"repeat_penalty": 1.0}

    def tokenize(self, text: str, special: bool) -> tuple[int, ...]:
        """The pieces come with the ids, so single-id detokenizing costs nothing after."""
        payload = {"content": text, "add_special": False, "parse_special": special,
                   "with_pieces": True}
        tokens = self.transport.request("POST", self.transport.root_url + "/tokenize",
                                        payload)["tokens"]
        ids = []
        for token in tokens:
            if isinstance(token, dict):
                ids.append(int(token["id"]))
                if isinstance(token.get("piece"), str):
                    self._pieces[int(token["id"])] = token["piece"]
            else:
                ids.append(int(token))
        return tuple(ids)

    def detokenize(self, ids: tuple[int, ...]) -> str:
        data = self.transport.request("POST", self.transport.root_url + "/detokenize",
                                      {"model": self.model, "tokens": list(ids)})
        return data["content"]

    def piece(self, token: int) -> str | None:
        return self._pieces.get(token)

    def render_chat(self, messages: Sequence[Message]) -> str | None:
        data = self.transport.probe("POST", self.transport.root_url + "/apply-template",
                                    {"messages": messages_json(messages)})
        if isinstance(data, dict) and isinstance(data.get("prompt"), str):
            return data["prompt"]
        return None

    def read_context_window(self) -> int | None:
        props = self.transport.probe("GET", self.transport.root_url + "/props")
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        if isinstance(settings, dict) and settings.get("n_ctx"):
            return int(settings["n_ctx"])
        return None

    def empty_cache_reads(self, text: str | None) -> list[dict[str, Any]]:
        return [{"prompt": "\n" if text is None else text, "cache_prompt": False}]

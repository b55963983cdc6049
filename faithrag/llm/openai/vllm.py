"""vLLM's OpenAI-compatible server.

POST /tokenize (text, or messages through the chat template) and /detokenize at the root; the
context window is `max_model_len` (in the /tokenize reply and /v1/models); top log-probs name
token ids with `return_tokens_as_token_ids`; `logit_bias` values are clamped to [-100, 100]
and ids outside the vocabulary refused. It takes the repetition penalty of a model's
generation_config by default, which plain decoding switches off. Its tokenize endpoint has no
switch for control-token markup: "<|im_end|>" in a text is read as the control token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithrag.llm.base import Message
from faithrag.llm.openai.flavour import Flavour
from faithrag.llm.openai.replies import messages_json


class VLLM(Flavour):
    name = "vllm"
    tokenizes = True
    lists_token_ids = True

    def plain_decoding(self) -> dict[str, float]:
        return {"repetition_penalty": 1.0}

    def token_id_fields(self) -> dict[str, Any]:
        return {"return_tokens_as_token_ids": True}  # "token_id:123" instead of text

    def tokenize(self, text: str, special: bool) -> tuple[int, ...]:
        payload = {"model": self.model, "prompt": text, "add_special_tokens": False}
        data = self.transport.request("POST", self.transport.root_url + "/tokenize", payload)
        return tuple(int(t) for t in data["tokens"])

    def detokenize(self, ids: tuple[int, ...]) -> str:
        data = self.transport.request("POST", self.transport.root_url + "/detokenize",
                                      {"model": self.model, "tokens": list(ids)})
        return data["prompt"]

    def count_chat_tokens(self, messages: Sequence[Message]) -> int | None:
        data = self.transport.request("POST", self.transport.root_url + "/tokenize", {
            "model": self.model, "messages": messages_json(messages),
            "add_generation_prompt": True})
        return len(data["tokens"])

"""The OpenAI wire shapes this backend reads and writes: messages as JSON, a reply's first
choice, and a /v1/completions reply's log-probs in one shape whatever the server answered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithrag.errors import ServerRejectedError
from faithrag.llm.base import Message


def messages_json(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def first_choice(data: Any, url: str) -> dict[str, Any]:
    """The first entry of a reply's `choices`; ServerRejectedError when there is none."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise ServerRejectedError(f"{url} answered without choices: {str(data)[:300]}",
                                  "Check that --base-url points at an OpenAI-compatible API.")
    return choices[0]


def completion_logprobs(data: Any, url: str) -> dict[str, Any]:
    """The log-probs of a /v1/completions reply in the legacy OpenAI shape (`tokens`,
    `token_logprobs`, `top_logprobs` keyed by token text). llama.cpp's llama-server answers in
    the chat shape (`content`: per token its id, log-prob and top log-probs, each with an id);
    its tokens are named "token_id:N" there, as vLLM names them with
    return_tokens_as_token_ids, so no text stands for two tokens. A `content` of another shape
    gives no log-probs ({})."""
    logprobs = first_choice(data, url).get("logprobs")
    if not isinstance(logprobs, dict):
        return {}
    content = logprobs.get("content")
    if content is None:
        return logprobs

    def entry(e: Any) -> bool:
        return (isinstance(e, dict) and type(e.get("id")) is int
                and type(e.get("logprob")) in (int, float))

    if not isinstance(content, list) or not all(
            entry(e) and isinstance(e.get("top_logprobs") or [], list)
            and all(entry(t) for t in e.get("top_logprobs") or []) for e in content):
        return {}
    return {"tokens": [f"token_id:{e['id']}" for e in content],
            "token_logprobs": [e.get("logprob") for e in content],
            "top_logprobs": [{f"token_id:{t['id']}": t.get("logprob")
                              for t in e.get("top_logprobs") or []} for e in content]}

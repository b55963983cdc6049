"""The OpenAI-compatible facade: a `/v1/chat/completions` body becomes a faithrag question, and
a faithrag result becomes a chat completion (or its stream of chunks).

The last user message is the question; other messages are not read (the pipeline has its own
prompts). The model name picks the method: `faithrag` runs the server's default pipeline,
`faithrag/<method>` that method. The extension field `faithrag` may carry `passages`,
`choices`, `rerank`, `verify`, `detect`, `on_conflict` and `k` exactly as in `/v1/ask`; the
completion carries the whole `/v1/ask` result (evidence, removed passages, conflict report,
trace) in its own top-level `faithrag` field, which the official client keeps in `model_extra`
(streamed: on the last chunk). Sampling settings (temperature, max_tokens, ...) are accepted and
not applied: the configured pipeline decides them. With the official client:

    client = openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="KEY or anything")
    reply = client.chat.completions.create(
        model="faithrag", messages=[{"role": "user", "content": "Who founded X?"}],
        extra_body={"faithrag": {"passages": [{"text": "X was founded by Y."}]}})
    reply.choices[0].message.content, reply.model_extra["faithrag"]["conflicts"]
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from faithrag.server.ask_request import AskBody, PassageIn
from faithrag.server.errors import RequestError, json_safe, openai_error
from faithrag.server.stages import Stages

MODEL_PREFIX = "faithrag"


class TextPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str = ""


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content if p.type == "text")
        return self.content or ""


class FaithragOptions(BaseModel):
    """The `/v1/ask` fields a chat message cannot carry."""

    model_config = ConfigDict(extra="forbid", strict=True)
    passages: list[PassageIn] | None = None
    choices: list[str] | None = None
    rerank: str | None = None
    verify: str | None = None
    detect: str | None = None
    on_conflict: str | None = None
    k: int | None = Field(None, ge=1)


class ChatCompletionRequest(BaseModel):
    """A chat completion request; fields other than these are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    model: str = MODEL_PREFIX
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    n: int = 1
    faithrag: FaithragOptions | None = None


def model_ids(stages: Stages) -> list[str]:
    return [MODEL_PREFIX, *(f"{MODEL_PREFIX}/{m}" for m in stages.methods)]


def models_list(stages: Stages, created: int) -> dict[str, Any]:
    return {"object": "list", "data": [model_info(name, created) for name in model_ids(stages)]}


def model_info(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "faithrag"}


def find_model(stages: Stages, name: str, created: int) -> dict[str, Any]:
    """`GET /v1/models/{name}`: the model, or RequestError (404) naming the ones there are."""
    if name not in model_ids(stages):
        raise RequestError(404, f"No model {name!r}.",
                           f"GET /v1/models lists them: {', '.join(model_ids(stages))}.")
    return model_info(name, created)


def to_ask_body(request: ChatCompletionRequest, stages: Stages) -> AskBody:
    """The `/v1/ask` body this chat request stands for; RequestError (400) when it has no user
    message, names an unknown model or asks for more than one choice."""
    if request.n != 1:
        raise RequestError(400, f"n={request.n} is not supported: a pipeline gives one answer.",
                           "Leave n out, or set it to 1.")
    if request.model not in model_ids(stages):
        raise RequestError(400, f"Unknown model {request.model!r}.",
                           f"GET /v1/models lists them: {', '.join(model_ids(stages))}.")
    question = next((m.text() for m in reversed(request.messages) if m.role == "user"), "")
    if not question.strip():
        raise RequestError(400, "There is no user message with text: it is the question.",
                           'Send messages=[{"role": "user", "content": "your question"}].')
    fields: dict[str, Any] = {"question": question}
    if request.model != MODEL_PREFIX:
        fields["method"] = request.model.split("/", 1)[1]
    if request.faithrag is not None:
        options = request.faithrag
        fields.update({name: getattr(options, name) for name in options.model_fields_set})
    return AskBody.model_validate(fields)


def _usage(result: dict[str, Any]) -> dict[str, int]:
    totals = result["trace"]["totals"]
    prompt, completion = int(totals["prompt_tokens"]), int(totals["completion_tokens"])
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


class Completion:
    """The ids and timestamps one response shares across its chunks."""

    def __init__(self, model: str):
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.model = model
        self.created = int(time.time())

    def _head(self, kind: Literal["chat.completion", "chat.completion.chunk"]) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def whole(self, result: dict[str, Any]) -> dict[str, Any]:
        return {**self._head("chat.completion"),
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": result["answer"]}}],
                "usage": _usage(result), "faithrag": result}

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None,
              **extra: Any) -> str:
        """One server-sent event."""
        payload = {**self._head("chat.completion.chunk"), "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            **extra}
        return f"data: {json.dumps(json_safe(payload), ensure_ascii=False, default=str)}\n\n"

    def last_chunks(self, result: dict[str, Any]) -> list[str]:
        """The answer, then the end with the usage and the faithrag result, then [DONE]."""
        return [self.chunk({"content": result["answer"]}),
                self.chunk({}, "stop", usage=_usage(result), faithrag=result),
                "data: [DONE]\n\n"]


def error_event(status: int, message: str, hint: str) -> str:
    """An error after the stream has started, in the shape OpenAI clients raise on."""
    return f"data: {json.dumps(openai_error(status, message, hint), ensure_ascii=False)}\n\n"

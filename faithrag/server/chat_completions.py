"""The OpenAI-compatible facade: a `/v1/chat/completions` body becomes a faithrag question and
the shape of its reply, and a faithrag result becomes a chat completion (or its stream of chunks).

The last user message is the question; other messages are not read (the pipeline has its own
prompts). The model name picks the method: `faithrag` runs the server's default pipeline,
`faithrag/<method>` that method. The extension field `faithrag` may carry `passages`,
`choices`, `rerank`, `verify`, `detect`, `on_conflict` and `k` exactly as in `/v1/ask`, and
`summary` (the conflict summary line, below); the completion carries the whole `/v1/ask` result
(evidence, removed passages, conflict report, trace) in its own top-level `faithrag` field,
which the official client keeps in `model_extra` (streamed: on the last chunk).

The reply (faithrag.server.reply): `max_tokens` (or `max_completion_tokens`) cuts it, the finish
reason saying "length" when it did; `response_format` `json_schema` or `json_object` makes it a
JSON object constrained to the schema; streamed, the final generation's text comes as it is
decoded. Sampling settings (`temperature`, `top_p`, `seed`) and `user` are accepted and not
applied: the configured pipeline decodes as its stages say. Every other field of OpenAI's API
(`tools`, `tool_choice`, `functions`, `n` > 1, `logprobs`, `stop`, ...) and any unknown field is
refused with a 400 naming it.

When the run met conflicts, the text reply ends with a summary line that a client which drops
extension fields still sees (left out of JSON replies, and off with `"summary": false` in the
extension or `server.conflict_summary = false`):

    Canberra

    [faithrag: conflicts=passage_vs_passage,context_vs_memory; sides=2,2; actions=removed,kept]

With the official client:

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

from pydantic import BaseModel, ConfigDict, Field, create_model

from faithrag import registry
from faithrag.server.ask_request import AskBody, PassageIn, stage_fields
from faithrag.server.errors import RequestError, json_safe, openai_error
from faithrag.server.reply import Reply, ReplyShape
from faithrag.server.stages import Stages

MODEL_PREFIX = "faithrag"
# the fields of OpenAI's chat API that this facade takes; any other is refused (to_ask_body)
TAKEN = ("model", "messages", "stream", "stream_options", "n", "max_tokens",
         "max_completion_tokens", "response_format", "logprobs", "temperature", "top_p", "seed",
         "user", "faithrag")
TOOL_FIELDS = ("tools", "tool_choice", "functions", "function_call", "parallel_tool_calls")
SUMMARY_PREFIX = "[faithrag: "


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


class _Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    passages: list[PassageIn] | None = None
    choices: list[str] | None = None


FaithragOptions = create_model(
    "FaithragOptions", __base__=_Evidence, __module__=__name__,
    __doc__="""The `/v1/ask` fields a chat message cannot carry (the generator is the model
    asked for), and whether the text reply ends with the conflict summary line (`summary`;
    left out: the server's `server.conflict_summary`).""",
    **stage_fields(tuple(entry for entry in registry.KINDS if entry.optional)),
    on_conflict=(str | None, None), k=(int | None, Field(None, ge=1)),
    summary=(bool | None, None))


class JsonSchemaFormat(BaseModel):
    """OpenAI's `response_format.json_schema`: the schema the reply must follow."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str = Field(min_length=1)
    description: str | None = None
    json_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"},
                                        alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class ChatCompletionRequest(BaseModel):
    """A chat completion request: the fields in TAKEN; others are kept to be refused by name
    (`to_ask_body`)."""

    model_config = ConfigDict(extra="allow")
    model: str = MODEL_PREFIX
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    n: int | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    response_format: ResponseFormat | None = None
    logprobs: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    user: str | None = None
    faithrag: FaithragOptions | None = None


def model_ids(stages: Stages) -> list[str]:
    return [MODEL_PREFIX, *(f"{MODEL_PREFIX}/{m}" for m in stages["generator"])]


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


def _check_supported(request: ChatCompletionRequest) -> None:
    """RequestError (400) naming the first field asked for that the facade does not carry out
    (a field sent as null asks for nothing)."""
    if request.n not in (None, 1):
        raise RequestError(400, f"n={request.n} is not supported: a pipeline gives one answer.",
                           "Leave n out, or set it to 1.")
    if request.logprobs:
        raise RequestError(400, "'logprobs' is not supported: the reply is the pipeline's "
                           "answer, not one sampled sequence with its log-probabilities.",
                           "Leave logprobs out; the trace in the reply's faithrag field has "
                           "every model call.")
    asked = [name for name, value in (request.model_extra or {}).items() if value is not None]
    tool = next((name for name in TOOL_FIELDS if name in asked), None)
    if tool is not None:
        raise RequestError(400, f"'{tool}' is not supported: the pipeline answers from its "
                           "evidence and calls no tools.",
                           "For structured output send response_format json_schema (LangChain: "
                           "with_structured_output(method=\"json_schema\")).")
    if asked:
        raise RequestError(400, f"'{asked[0]}' is not supported by faithrag's chat completions.",
                           f"Leave it out; the fields taken are {', '.join(TAKEN)} "
                           "(docs/server.md).")
    if request.max_tokens and request.max_completion_tokens \
            and request.max_tokens != request.max_completion_tokens:
        raise RequestError(400, f"max_tokens={request.max_tokens} and max_completion_tokens="
                           f"{request.max_completion_tokens} disagree.",
                           "Send one of them (max_completion_tokens is OpenAI's current name).")
    form = request.response_format
    if form is not None and form.type == "json_schema" and form.json_schema is None:
        raise RequestError(400, "response_format of type json_schema has no json_schema.",
                           'Send {"type": "json_schema", "json_schema": {"name": "reply", '
                           '"schema": {...}}}, or {"type": "json_object"}.')


def to_ask_body(request: ChatCompletionRequest, stages: Stages) -> AskBody:
    """The `/v1/ask` body this chat request stands for; RequestError (400) when it has no user
    message, names an unknown model or asks for a field the facade does not carry out."""
    _check_supported(request)
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
        fields.update({name: getattr(options, name) for name in options.model_fields_set
                       if name != "summary"})
    return AskBody.model_validate(fields)


def reply_shape(request: ChatCompletionRequest, summary: bool) -> ReplyShape:
    """What `request` asks of its reply; `summary` is the server's default for the summary
    line."""
    form = request.response_format
    schema = None
    if form is not None and form.type == "json_object":
        schema = {"type": "object"}
    elif form is not None and form.type == "json_schema" and form.json_schema is not None:
        schema = form.json_schema.json_schema
    options = request.faithrag
    if options is not None and options.summary is not None:
        summary = options.summary
    return ReplyShape(request.max_completion_tokens or request.max_tokens, schema, summary)


def conflict_summary(conflicts: list[dict[str, Any]]) -> str:
    """The summary line of a run's conflicts (`Result.to_dict()["conflicts"]`): their kinds, the
    number of sides of each and what was done, in the order they were met; "" for none."""
    if not conflicts:
        return ""
    def listed(values: list[Any]) -> str:
        return ",".join(str(v) for v in values)
    return (f"{SUMMARY_PREFIX}conflicts={listed([c['kind'] for c in conflicts])}; "
            f"sides={listed([len(c['sides']) for c in conflicts])}; "
            f"actions={listed([c['action'] for c in conflicts])}]")


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

    @staticmethod
    def _summary(result: dict[str, Any], reply: Reply) -> str:
        """What follows the reply's content: a blank line and the conflict summary, when asked
        for and the reply is text."""
        line = conflict_summary(result["conflicts"])
        wanted = reply.shape.summary and reply.shape.schema is None and line
        return f"\n\n{line}" if wanted else ""

    def whole(self, result: dict[str, Any], reply: Reply) -> dict[str, Any]:
        content = reply.content + self._summary(result, reply)
        return {**self._head("chat.completion"),
                "choices": [{"index": 0, "finish_reason": reply.finish_reason, "logprobs": None,
                             "message": {"role": "assistant", "content": content}}],
                "usage": _usage(result), "faithrag": result}

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None,
              **extra: Any) -> str:
        """One server-sent event."""
        payload = {**self._head("chat.completion.chunk"), "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            **extra}
        return f"data: {json.dumps(json_safe(payload), ensure_ascii=False, default=str)}\n\n"

    def last_chunks(self, result: dict[str, Any], reply: Reply) -> list[str]:
        """What the stream has not sent yet of the content (all of it when no generation
        streamed it) and the summary, then the end with the finish reason, the usage and the
        faithrag result, then [DONE]."""
        sent = reply.sent if reply.content.startswith(reply.sent) else ""
        rest = reply.content[len(sent):] + self._summary(result, reply)
        return [*([self.chunk({"content": rest})] if rest else []),
                self.chunk({}, reply.finish_reason, usage=_usage(result), faithrag=result),
                "data: [DONE]\n\n"]


def error_event(status: int, message: str, hint: str) -> str:
    """An error after the stream has started, in the shape OpenAI clients raise on."""
    return f"data: {json.dumps(openai_error(status, message, hint), ensure_ascii=False)}\n\n"

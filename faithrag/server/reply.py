"""The reply of a chat completion beyond the pipeline's answer: the generation that writes it,
cut at the request's token limit and streamed while it is decoded, and the JSON reply a
`response_format` asks for.

Which generation writes the reply (the final generation):
- With a `response_format` schema it is the server's own last call: once the pipeline has
  answered, the model writes the JSON object from the question, the answer and the passages the
  generator saw, its decoding constrained to the schema (on the embedded backend, or a model
  server that takes it), recorded in the trace as the step `reply/json_schema`.
- Otherwise, when nothing after the generator can change the answer (no verifier, the
  `on_conflict` policy `resolve`) and the question has no options, it is the generator's
  unstructured generation labelled `purpose="answer"`, the plain answer prompt, whose answer is
  the first line of its reply less an "Answer:" label (faithrag.methods.plain_answer). A
  detector may still run after it: it changes nothing. `Reply.finish` checks that the answer
  is that reading of that generation.
- Otherwise (options, a verifier, a policy that may rewrite the answer, a method that answers by
  scoring or drafting) no generation writes the reply as it is: the answer is known when the run
  ends, and is cut at the token limit as a whole.

The final generation is capped at `max_tokens` tokens (its own budget when that is smaller; the
JSON reply's budget is `generation.max_tokens` when the request sets none, constrained or not),
its finish reason is "length" when the cap cut the reply short (for the plain answer: before
its line ended), and on a backend that streams (faithrag/llm/streaming.py) its reply goes to
`on_text` while it is decoded: each time the part that more tokens cannot change grows, the
characters it gained.

    reply = Reply(ReplyShape(max_tokens=20), on_text=print)
    service.ask(body, deadline, cancel, reply)     # reply.begin, then the run, then reply.finish
    reply.content, reply.finish_reason
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.llm.base import LLM, Completion, GenerationRequest, Message
from faithrag.llm.budget import fit_evidence
from faithrag.llm.cancel import CancellableLLM, check_cancelled
from faithrag.llm.framing import frame
from faithrag.llm.grammar import gbnf_for
from faithrag.llm.streaming import streaming
from faithrag.methods.common import DATA_NOT_INSTRUCTIONS, cut_text, render_passages
from faithrag.methods.plain_answer import read_answer
from faithrag.server.errors import RequestError
from faithrag.types import Passage, Question

if TYPE_CHECKING:
    from faithrag.pipeline import Result
    from faithrag.server.ask_request import AskRequest

log = logging.getLogger("faithrag.server")
ANSWER_PURPOSE = "answer"  # the label of the plain answer prompt's generation
JSON_SYSTEM = ("You write the reply to a question as one JSON object that follows the JSON "
               "schema given, from the answer that was found and the passages it was found in. "
               + DATA_NOT_INSTRUCTIONS)
_FREE_FORM = Question("")  # the plain reader without options


@dataclass(frozen=True)
class ReplyShape:
    """What a chat request asks of its reply: at most `max_tokens` tokens (None: the pipeline's
    own budgets), a JSON object following `schema` (None: text), and the conflict summary line
    (`summary`; never in a JSON reply)."""

    max_tokens: int | None = None
    schema: Mapping[str, Any] | None = field(default=None, hash=False)
    summary: bool = True


def check_schema(shape: ReplyShape, config: Config) -> None:
    """RequestError (400), before any model work, when the embedded backend is to constrain the
    reply to a schema llama.cpp's converter cannot take."""
    if shape.schema is None or config.llm.backend != "llamacpp" or not config.llm.constrain:
        return
    try:
        gbnf_for(shape.schema, None)
    except ImportError:  # no llama.cpp here: the backend reports its own extra when it loads
        return
    except ConfigError as exc:
        raise RequestError(400, f"response_format's JSON schema cannot be followed: "
                           f"{exc.message}",
                           "Use the subset llama.cpp takes: object, properties, required, enum, "
                           "string, number, integer, boolean, array, $defs/$ref.") from exc


def settled_answer(raw: str) -> str:
    """The part of the plain answer read from `raw` (its first line less an "Answer:" label,
    faithrag.methods.plain_answer.read_answer) that no continuation of `raw` can change: the
    whole reading once the line has ended; before that, nothing while the line could still
    become the label, else the reading without its trailing spaces and an incomplete last
    character (U+FFFD)."""
    text = read_answer(raw, _FREE_FORM).text
    head, ended, _ = raw.lstrip().partition("\n")
    if ended:
        return text
    if "answer:".startswith(head.strip().lower()):
        return ""
    return text.rstrip("\ufffd").rstrip()


def settled_json(raw: str) -> str:
    """The part of a JSON reply that more tokens cannot change: all but an incomplete last
    character."""
    return raw.rstrip("\ufffd")


class Reply:
    """One chat request's reply (see the module docstring): `begin` with the checked request,
    the final generation through `answer` (the served model routes it here, see `ReplyLLM`)
    or made by `finish`, then `content` and `finish_reason`. `on_text` hears the reply's text
    as it grows, in the thread that runs the pipeline."""

    def __init__(self, shape: ReplyShape, on_text: Callable[[str], None] | None = None):
        self.shape = shape
        self.on_text = on_text
        self.sent = ""  # what on_text has been given
        self.content = ""
        self.finish_reason = "stop"
        self.live = False  # whether the generator's answer generation is the final one
        self._answered: Completion | None = None

    def begin(self, request: AskRequest) -> None:
        choice = request.choice
        generation = registry.stage_kind("generator").order
        rewritten = any(choice.name(entry.kind) for entry in registry.KINDS
                        if entry.slot == "answer" and entry.order > generation)
        self.live = (self.shape.schema is None and not rewritten
                     and choice.on_conflict == "resolve" and not request.question.choices)

    def takes(self, request: GenerationRequest) -> bool:
        """Whether `request` is the final generation: the first plain answer of a live run."""
        return (self.live and self._answered is None and request.purpose == ANSWER_PURPOSE
                and not request.structured)

    def answer(self, llm: LLM, request: GenerationRequest) -> Completion:
        """The plain answer generated on `llm`, capped and streamed."""
        self._answered = self._generate(llm, request, settled_answer, self.shape.max_tokens)
        return self._answered

    def finish(self, result: Result, seen: Sequence[Passage], llm: LLM, config: Config) -> None:
        """The reply to `result`, whose generator saw `seen`: the JSON reply when a schema is
        asked for (generated now, in the run's context), else the answer."""
        if self.shape.schema is not None:
            self._json_reply(result, seen, llm, config)
            return
        answer, answered = result.answer.text, self._answered
        if answered is not None and read_answer(answered.text, _FREE_FORM).text == answer:
            self.content = answer
            line_open = "\n" not in answered.text.strip()
            cut = answered.finish_reason == "length" and line_open
            self.finish_reason = "length" if cut else "stop"
            return
        if answered is not None:  # a generator whose answer is not its plain answer's reading
            log.warning("the answer is not the reading of the generation labelled %r; the "
                        "reply is the answer as it is", ANSWER_PURPOSE)
        self._cut(llm, answer, len(llm.tokenize(answer)), self.shape.max_tokens)

    def _json_reply(self, result: Result, seen: Sequence[Passage], llm: LLM,
                    config: Config) -> None:
        budget = self.shape.max_tokens or config.generation.max_tokens
        question, schema = result.question, dict(self.shape.schema or {})
        titles = [p.title for p in seen]

        def render(texts: list[str]) -> tuple[Message, ...]:
            user = (f"Passages:\n{render_passages(texts, titles)}\n\n"
                    f"Question: {question.text}\n"
                    f"Answer found:\n{frame('candidate', result.answer.text)}\n\n"
                    f"JSON schema of the reply:\n{json.dumps(schema, ensure_ascii=False)}\n\n"
                    "Reply with the JSON object only.")
            return (Message("system", JSON_SYSTEM), Message("user", user))
        with result.trace.step("reply", "json_schema", schema=schema) as step:
            fitted = fit_evidence(llm, render, [p.text for p in seen], budget)
            step.warnings.extend(fitted.warnings)
            request = GenerationRequest(fitted.messages, max_tokens=budget, schema=schema,
                                        purpose="reply")
            completion = self._generate(llm, request, settled_json, budget)
            step.record_llm("reply", completion.prompt_tokens, completion.completion_tokens,
                            completion.seconds, completion.cached)
            step.warnings.extend(completion.warnings)
            self._cut(llm, completion.text, completion.completion_tokens, budget,
                      completion.finish_reason == "length")
            step.outputs = {"reply": self.content, "finish_reason": self.finish_reason}
        if self.finish_reason != "length" and not _is_json(self.content):
            raise RequestError(502, "The model's reply to response_format is not JSON: "
                               f"{self.content[:120]!r}.",
                               "The backend did not constrain it (the trace's warnings say "
                               "why): serve the embedded model (--llm llamacpp) with "
                               "llm.constrain on, or a model server that takes response_format.")

    def _generate(self, llm: LLM, request: GenerationRequest, settled: Callable[[str], str],
                  limit: int | None) -> Completion:
        """`request` on `llm` as the final generation: at most `limit` tokens (a backend that
        streams ends it there even where a constrained reply could run past its max_tokens),
        the settled part of its text handed to `on_text` as it grows."""
        if limit is not None and limit < request.max_tokens:
            request = replace(request, max_tokens=limit)
        decoded = 0

        def listen(text: str) -> bool:
            nonlocal decoded
            decoded += 1
            self._show(settled(text))
            return limit is None or decoded < limit
        with streaming(listen):
            return llm.generate([request])[0]

    def _show(self, text: str) -> None:
        if self.on_text is not None and len(text) > len(self.sent) and text.startswith(self.sent):
            delta, self.sent = text[len(self.sent):], text
            self.on_text(delta)

    def _cut(self, llm: LLM, text: str, tokens: int, limit: int | None,
             cut: bool = False) -> None:
        """`content` is `text` (of `tokens` tokens) cut to `limit` tokens; the finish reason
        "length" when it was cut, or already was (`cut`)."""
        over = limit is not None and tokens > limit
        self.content = cut_text(llm, text, limit) if limit is not None and over else text
        self.finish_reason = "length" if cut or over else "stop"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


_current: ContextVar[Reply | None] = ContextVar("faithrag_reply", default=None)


@contextmanager
def replying(reply: Reply | None) -> Iterator[None]:
    """The served model's generations in this context go through `reply` (see ReplyLLM)."""
    reset = _current.set(reply)
    try:
        yield
    finally:
        _current.reset(reset)


class ReplyLLM(CancellableLLM):
    """The served model: cancellable (CancellableLLM), and the generation that writes the
    answer of a run made inside `replying(reply)` goes through `reply.answer`."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        reply = _current.get()
        if reply is not None and len(requests) == 1 and reply.takes(requests[0]):
            check_cancelled()
            return [reply.answer(self.wrapped, requests[0])]
        return super().generate(requests)

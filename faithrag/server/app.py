"""The HTTP API as an ASGI app (FastAPI), behind GuardMiddleware. Every error is
`{"error": ..., "hint": ...}` with its status; the server keeps running.

    GET  /                     the inspector page
    GET  /health               {"status": "ok", "model": ..., "method": ...}
    GET  /v1/methods           the registered stages and conflict policies, and the defaults
    POST /v1/ask               AskBody -> the result, conflict report and trace included
    GET  /v1/models            the OpenAI-style model list (one per method)
    GET  /v1/models/{id}       one of them
    POST /v1/chat/completions  the OpenAI-compatible facade (faithrag.server.chat_completions)
    GET  /docs, /openapi.json  the interactive reference and the schema

    app = create_app(AskService(config, llm, retriever, Pipeline.from_parts), ServerSettings())
    uvicorn.run(app, host="127.0.0.1", port=8000)
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from importlib.resources import files
from typing import Any, TypeVar

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ValidationError, create_model
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware

from faithrag import registry
from faithrag.errors import FaithragError
from faithrag.llm.cancel import CancelToken
from faithrag.server.ask_request import AskBody
from faithrag.server.chat_completions import (
    ChatCompletionRequest,
    Completion,
    error_event,
    find_model,
    models_list,
    reply_shape,
    to_ask_body,
)
from faithrag.server.errors import JSONBody, RequestError, error_response, status_for
from faithrag.server.guard import GuardMiddleware
from faithrag.server.reply import Reply, ReplyShape, check_schema
from faithrag.server.service import AskService
from faithrag.server.settings import ServerSettings
from faithrag.types import Conflict, ConflictCheck

log = logging.getLogger("faithrag.server")
T = TypeVar("T")
SCHEMA_HINT = "The request schema is at /openapi.json, readable at /docs."
KEEP_ALIVE_SECONDS = 5.0


class ServerInfo(BaseModel):
    status: str
    model: str
    method: str


# `/v1/methods`: the stage kinds (faithrag.registry.KINDS) under `stages`, and per kind its
# registered stages under its `listing` and its default under its `key`
Defaults = create_model(
    "Defaults", __module__=__name__,
    **{entry.key: (str | None if entry.optional else str, ...) for entry in registry.KINDS},
    on_conflict=(str, ...), k=(int, ...))
class StageKindInfo(BaseModel):
    key: str
    listing: str
    label: str
    optional: bool


MethodsInfo = create_model(
    "MethodsInfo", __module__=__name__, stages=(list[StageKindInfo], ...),
    **{entry.listing: (list[str], ...) for entry in registry.KINDS},
    on_conflict=(list[str], ...), defaults=(Defaults, ...), retrieval=(bool, ...))


class PassageOut(BaseModel):
    id: str
    title: str
    source: str
    score: float | None
    text: str


class RemovedOut(BaseModel):
    id: str
    reason: str
    text: str


class EvidenceSummary(BaseModel):
    """How many passages the generator was handed, saw, and did not see (dropped), which it saw
    cut short, and why."""

    given: int
    seen: int
    dropped: int
    cut: list[str]
    reason: str


class AskResult(BaseModel):
    """The body of `/v1/ask`: faithrag.pipeline.Result.to_dict(), key for key."""

    question: str
    choices: list[str] | None
    answer: str
    choice_index: int | None
    parse_status: str
    reason: str
    passages: list[PassageOut]
    removed: list[RemovedOut]
    evidence: EvidenceSummary
    conflicts: list[Conflict]
    on_conflict: dict[str, Any] | None
    conflict_checks: list[ConflictCheck]
    trace: dict[str, Any]


class ErrorBody(BaseModel):
    error: str
    hint: str


def _one_line(errors: list[Any]) -> str:
    """A pydantic error list as one sentence about its first error."""
    first = errors[0]
    loc = list(first["loc"])
    where = ".".join(str(part) for part in (loc[1:] if loc[:1] == ["body"] else loc))
    if first["type"] == "json_invalid":
        return f"The request body is not valid JSON: {first.get('ctx', {}).get('error', '')}."
    if first["type"] == "missing" and not where:
        return "The request body is empty."
    if first["type"] == "missing":
        return f"'{where}' is required."
    if first["type"] == "extra_forbidden":
        return f"Unknown field '{where}'."
    if first["type"] in ("model_type", "model_attributes_type", "dict_type") and not where:
        return "The request body must be a JSON object."
    return f"'{where}': {first['msg']}." if where else f"{first['msg']}."


def create_app(service: AskService, settings: ServerSettings | None = None) -> Any:
    """The guarded ASGI app for `service`."""
    settings = settings or ServerSettings(limits=service.limits)
    inspector_page = (files("faithrag.server") / "inspector.html").read_bytes()
    inspector_headers = {"Content-Security-Policy": inspector_csp(inspector_page),
                         "X-Frame-Options": "DENY", "Cache-Control": "no-store"}
    # the interactive docs with their assets served from here (fastapi-offline), not a CDN
    api = FastAPIOffline(docs_url="/docs", redoc_url=None, static_url="/docs/static",
                         title="faithrag", summary="Retrieval-augmented answers that stay right "
                         "when their evidence is in conflict.", version="1",
                         responses={400: {"model": ErrorBody}, 401: {"model": ErrorBody},
                                    413: {"model": ErrorBody}, 504: {"model": ErrorBody}})
    started = int(time.time())

    async def in_thread(work: Callable[[float, CancelToken], T]) -> T:
        """`work(deadline, cancel)` in a worker thread, answered 504 past the request time limit.
        When it times out or its caller is cancelled (a streaming client has gone), `cancel`
        is set: what is left of the run stops at its next model call."""
        seconds = service.limits.request_seconds
        deadline = time.monotonic() + seconds
        cancel = CancelToken()
        try:
            return await asyncio.wait_for(
                anyio.to_thread.run_sync(work, deadline, cancel, abandon_on_cancel=True), seconds)
        except asyncio.TimeoutError:
            raise RequestError(504, f"The request did not finish within {seconds:g} s.",
                               "Send fewer passages or a lighter method, or restart the server "
                               "with a larger --request-timeout.") from None
        except FaithragError:
            raise
        except Exception as exc:  # one failed run must not stop the server; logged once
            log.exception("the pipeline failed")
            raise RequestError(500, f"{type(exc).__name__}: {exc}",
                               "The server log has the traceback.") from exc
        finally:
            cancel.cancel()  # a run still going (timed out, or its caller gone) stops

    async def answer(body: AskBody) -> dict[str, Any]:
        return await in_thread(lambda deadline, cancel: service.ask(body, deadline, cancel))

    @api.exception_handler(FaithragError)
    async def faithrag_error(request: Request, exc: FaithragError) -> JSONBody:
        return error_response(status_for(exc), exc.message, exc.hint, path=request.url.path)

    @api.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError) -> JSONBody:
        return error_response(400, _one_line(list(exc.errors())), SCHEMA_HINT,
                              path=request.url.path)

    @api.exception_handler(ValidationError)
    async def invalid_fields(request: Request, exc: ValidationError) -> JSONBody:
        return error_response(400, _one_line(exc.errors()), SCHEMA_HINT, path=request.url.path)

    @api.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONBody:
        headers = dict(exc.headers or {})
        if exc.status_code == 404:
            return error_response(404, f"No such path: {request.url.path}", _paths_hint(api))
        if exc.status_code == 405:
            return error_response(405, f"{request.method} is not allowed on {request.url.path}.",
                                  f"Use {headers.get('allow', 'another method')}.", headers,
                                  request.url.path)
        cause = exc.__cause__
        if exc.status_code == 400 and isinstance(cause, ValueError):  # the body's JSON parse
            reason = str(cause).split(";")[0]  # Python's own advice after it is for servers
            return error_response(400, f"The request body cannot be read as JSON: {reason}.",
                                  f"Send one JSON object in UTF-8 with numbers of ordinary size. "
                                  f"{SCHEMA_HINT}", path=request.url.path)
        return error_response(exc.status_code, str(exc.detail), SCHEMA_HINT, headers,
                              request.url.path)

    @api.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONBody:  # uvicorn logs it
        return error_response(500, f"{type(exc).__name__}: {exc}",
                              "The server log has the traceback.", path=request.url.path)

    @api.get("/", response_class=HTMLResponse)
    async def inspector() -> HTMLResponse:
        """The inspector: a page that asks questions and draws the answer, the evidence the
        generator saw, the removed passages and the trace."""
        return HTMLResponse(inspector_page, headers=inspector_headers)

    @api.get("/health", response_model=ServerInfo)
    async def health() -> JSONBody:
        """The model this server runs and its default method."""
        return JSONBody(service.health())

    @api.get("/v1/methods", response_model=MethodsInfo)
    async def methods() -> JSONBody:
        """The registered stages (methods, re-rankers, verifiers, conflict detectors), the
        conflict policies, this server's defaults, and whether it has an index."""
        return JSONBody(service.methods())

    @api.post("/v1/ask", response_model=AskResult)
    async def ask(body: AskBody) -> JSONBody:
        """Answer a question through the pipeline. `passages` in the result are exactly the ones
        the generator saw; `evidence` says how many were dropped or cut, and why; `removed`
        lists what a re-ranker took out, with its reason; `conflicts` the disagreements the
        stages met (each side with its answer, quote and passages, and what was done about
        it), `conflict_checks` every check they made, including those that found nothing or
        could not tell."""
        return JSONBody(await answer(body))

    @api.get("/v1/models")
    async def models() -> JSONBody:
        """OpenAI-style: `faithrag` (the default pipeline) and `faithrag/<method>`."""
        return JSONBody(models_list(service.stages, started))

    @api.get("/v1/models/{model:path}")
    async def model(model: str) -> JSONBody:
        """OpenAI-style: one model of the list (`models.retrieve` in the official client)."""
        return JSONBody(find_model(service.stages, model, started))

    @api.post("/v1/chat/completions")
    async def chat_completions(request: ChatCompletionRequest) -> Any:
        """OpenAI-compatible: the last user message is the question; `faithrag` (extension
        field) carries passages, choices, rerank, verify, detect, on_conflict, k and summary;
        the reply's `faithrag` field carries the `/v1/ask` result, its conflict report
        included. `max_tokens` cuts the reply, `response_format` makes it JSON, and `stream:
        true` sends server-sent events, the final generation's text as it is decoded."""
        body = to_ask_body(request, service.stages)
        shape = reply_shape(request, service.config.server.conflict_summary)
        check_schema(shape, service.config)
        completion = Completion(request.model)
        if not request.stream:
            reply = Reply(shape)
            result = await in_thread(lambda deadline, cancel: service.ask(body, deadline,
                                                                          cancel, reply))
            return JSONBody(completion.whole(result, reply))
        return StreamingResponse(_stream(completion, body, shape),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    async def _stream(completion: Completion, body: AskBody,
                      shape: ReplyShape) -> AsyncIterator[str]:
        """The role at once; the reply's text as the run hands it over (comments while there
        is none, to keep proxies and clients waiting); the rest and the end once it is done."""
        loop = asyncio.get_running_loop()
        texts: asyncio.Queue[str | None] = asyncio.Queue()
        reply = Reply(shape, lambda text: loop.call_soon_threadsafe(texts.put_nowait, text))
        yield completion.chunk({"role": "assistant", "content": ""})
        task = asyncio.ensure_future(in_thread(
            lambda deadline, cancel: service.ask(body, deadline, cancel, reply)))
        # None after the last text: the run's texts are all queued before it ends
        task.add_done_callback(lambda _: texts.put_nowait(None))
        waiting: asyncio.Future[str | None] | None = None
        try:
            while True:
                waiting = waiting or asyncio.ensure_future(texts.get())
                done, _ = await asyncio.wait({waiting}, timeout=KEEP_ALIVE_SECONDS)
                if not done:
                    yield ": running\n\n"  # a comment
                    continue
                text, waiting = waiting.result(), None
                if text is None:
                    break
                yield completion.chunk({"content": text})
            result = task.result()
        except FaithragError as exc:
            yield error_event(status_for(exc), exc.message, exc.hint)
            return
        finally:
            task.cancel()
            if waiting is not None:
                waiting.cancel()
        for chunk in completion.last_chunks(result, reply):
            yield chunk

    async def app_with_options(scope: Any, receive: Any, send: Any) -> None:
        """OPTIONS says what a path allows (CORS preflights from allowed origins are answered
        before this)."""
        if scope["type"] != "http" or scope["method"] != "OPTIONS":
            await api(scope, receive, send)
            return
        verbs = {m for r in api.routes if getattr(r, "path", None) == scope["path"]
                 for m in getattr(r, "methods", None) or ()}
        if verbs:
            allowed = sorted(verbs | {"OPTIONS"} | ({"HEAD"} if "GET" in verbs else set()))
            response: Response = Response(status_code=204, headers={"Allow": ", ".join(allowed)})
        else:
            response = error_response(404, f"No such path: {scope['path']}", _paths_hint(api))
        await response(scope, receive, send)

    app: Any = app_with_options
    if settings.allowed_origins:
        app = CORSMiddleware(app, allow_origins=list(settings.allowed_origins),
                             allow_methods=["GET", "POST"],
                             allow_headers=["Authorization", "Content-Type"])
    return GuardMiddleware(app, settings)


def inspector_csp(page: bytes) -> str:
    """The inspector's Content-Security-Policy: the page's own inline script and style run, named
    by their SHA-256 (no other inline code, so no injected script); it talks to this server only,
    and no other page may frame it."""
    def allowed(tag: bytes) -> str:
        return " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(body).digest()).decode()}'"
                        for body in re.findall(b"<" + tag + b">(.*?)</" + tag + b">", page,
                                               re.DOTALL))
    return (f"default-src 'none'; script-src {allowed(b'script')}; "
            f"style-src {allowed(b'style')}; connect-src 'self'; img-src 'self' data:; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _paths_hint(api: FastAPI) -> str:
    paths = sorted({r.path for r in api.routes if not r.path.startswith("/docs/")})
    return f"Paths: {', '.join(paths)}"

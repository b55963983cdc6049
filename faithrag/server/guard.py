"""The checks every request passes before it reaches a route, as one ASGI middleware.

In order: the Host header names this server (DNS rebinding); a cross-origin request comes from
an allowed origin (403); the bearer token, when one is set (401); a POST body is
`application/json` (415); its declared or actual size is within the limit (413, at once for a
declared Content-Length) and arrives whole within the body deadline (408); it is UTF-8 (400);
its JSON nesting is within the limit
(400). HEAD is answered as GET without the body. Example:

    app = GuardMiddleware(fastapi_app, ServerSettings(api_key="s3cret"))
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from faithrag.server.errors import error_response
from faithrag.server.settings import ServerSettings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Pages that hold no data and start no work: a browser must be able to load them before the
# user has typed a token into them.
PUBLIC_PATHS = ("/", "/docs", "/openapi.json")
PUBLIC_PREFIX = "/docs/static/"
BODY_METHODS = ("POST", "PUT", "PATCH")
# A refused body that is still arriving is read and dropped (up to this much, while it keeps
# coming) so that the client, still sending, reads the refusal instead of a reset connection.
DRAIN_BYTES = 64 << 20
DRAIN_IDLE_SECONDS = 0.2
OPEN_BRACKETS, CLOSE_BRACKETS = frozenset(b"[{"), frozenset(b"]}")


class Refused(Exception):
    def __init__(self, status: int, error: str, hint: str = "",
                 headers: dict[str, str] | None = None):
        super().__init__(error)
        self.status, self.error, self.hint, self.headers = status, error, hint, headers or {}


def split_host(value: str) -> str:
    """`name:port`, `[v6]:port` or `name` -> the lower-case name without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether `body`, read as JSON, nests arrays and objects deeper than `limit`; brackets
    inside strings do not count. Stops at the first level over the limit."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth, in_string, escaped = 0, False, False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in OPEN_BRACKETS:
            depth += 1
            if depth > limit:
                return True
        elif byte in CLOSE_BRACKETS:
            depth -= 1
    return False


def _no_sniffing(send: Send) -> Send:
    """Every response keeps its declared Content-Type: browsers must not guess HTML in it."""
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []),
                                              (b"x-content-type-options", b"nosniff")]}
        await send(message)
    return wrapped


async def _drain(receive: Receive) -> None:
    left = DRAIN_BYTES
    while left > 0:
        try:
            message = await asyncio.wait_for(receive(), DRAIN_IDLE_SECONDS)
        except asyncio.TimeoutError:
            return
        left -= len(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body", False):
            return


class GuardMiddleware:
    def __init__(self, app: ASGIApp, settings: ServerSettings):
        self.app = app
        self.settings = settings
        self.hosts = settings.host_names
        self.origins = frozenset(o.rstrip("/").lower() for o in settings.allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _no_sniffing(send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            self._check_host(headers)
            self._check_origin(scope["method"], headers)
            preflight = (scope["method"] == "OPTIONS" and "origin" in headers
                         and "access-control-request-method" in headers)
            if not preflight:
                self._check_token(scope["path"], headers)
            if scope["method"] in BODY_METHODS:
                receive = await self._buffered_body(headers, receive)
        except Refused as refused:
            if scope["method"] in BODY_METHODS:
                await _drain(receive)
            response = error_response(refused.status, refused.error, refused.hint,
                                      refused.headers, scope["path"])
            await response(scope, receive, send)
            return
        if scope["method"] == "HEAD":
            scope = {**scope, "method": "GET"}  # the server itself leaves out the body
        await self.app(scope, receive, send)

    def _check_host(self, headers: dict[str, str]) -> None:
        host = headers.get("host", "")
        if split_host(host) not in self.hosts:
            raise Refused(400, f"This server does not answer to the host name {host!r}.",
                          "Use the address the server was started on, or restart it with "
                          f"--allowed-host {split_host(host) or 'NAME'}.")

    def _check_origin(self, method: str, headers: dict[str, str]) -> None:
        origin = headers.get("origin")
        if origin is None:
            # a browser names the origin of every cross-origin request but a plain GET (a
            # link, an image), which starts no work
            if method in BODY_METHODS and headers.get("sec-fetch-site") == "cross-site":
                raise Refused(403, "Cross-site requests are refused.",
                              "Restart the server with --allowed-origin ORIGIN to allow one.")
            return
        parts = urlsplit(origin)
        same_origin = (parts.scheme in ("http", "https")
                       and parts.netloc.lower() == headers.get("host", "").lower())
        if not same_origin and origin.rstrip("/").lower() not in self.origins:
            raise Refused(403, f"Requests from the origin {origin!r} are refused.",
                          f"Restart the server with --allowed-origin {origin} to allow it.")

    def _check_token(self, path: str, headers: dict[str, str]) -> None:
        key = self.settings.api_key
        if not key or path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIX):
            return
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(),
                                                                 key.encode()):
            raise Refused(401, "A valid API key is required.",
                          "Send the header 'Authorization: Bearer KEY' with the server's "
                          "--api-key (or FAITHRAG_API_KEY).", {"WWW-Authenticate": "Bearer"})

    async def _buffered_body(self, headers: dict[str, str], receive: Receive) -> Receive:
        """The whole body, checked; the app reads it from the returned `receive`."""
        limits = self.settings.limits
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise Refused(415, f"The body must be application/json, not {media_type or 'untyped'}.",
                          "Send the header 'Content-Type: application/json'.")
        too_large = ("Send fewer or shorter passages, or restart the server with a larger "
                     "--max-body-bytes.")
        declared = headers.get("content-length")
        if declared is not None:
            if not (declared.isascii() and declared.isdigit()):
                raise Refused(400, f"Content-Length {declared!r} is not a byte count.")
            if int(declared) > limits.max_body_bytes:
                raise Refused(413, f"The request body is {int(declared)} bytes, over the limit "
                                   f"of {limits.max_body_bytes}.", too_large)
        chunks, size, more = [], 0, True
        deadline = asyncio.get_running_loop().time() + limits.body_seconds  # the whole body's
        while more:
            try:
                message = await asyncio.wait_for(
                    receive(), max(0.0, deadline - asyncio.get_running_loop().time()))
            except asyncio.TimeoutError:
                raise Refused(408, "The request body did not arrive in time.",
                              f"Send the whole body within {limits.body_seconds:g} s.",
                              {"Connection": "close"}) from None  # the rest is not awaited
            if message["type"] == "http.disconnect":
                raise Refused(400, "The client closed the connection before sending its body.")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise Refused(413, f"The request body is over the limit of "
                                   f"{limits.max_body_bytes} bytes.", too_large)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Refused(400, f"The request body is not valid UTF-8 (byte {exc.start}).",
                          "Send the JSON body encoded as UTF-8.") from None
        if json_depth_exceeds(body, limits.max_json_depth):
            raise Refused(400, f"The JSON body is nested deeper than {limits.max_json_depth} "
                               "levels.", "A request body is an object of flat fields; see "
                                          "/openapi.json.")
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # from here on: the disconnect, when it comes
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return replay

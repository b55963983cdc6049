"""The HTTP API on the standard library's ThreadingHTTPServer: routing, the body size limit and
JSON errors. A bad request gets `{"error": ..., "hint": ...}` and the server keeps running.

    GET  /            the inspector page
    GET  /health      {"status": "ok", "model": ..., "method": ...}
    GET  /v1/methods  the registered methods, re-rankers and verifiers, and the defaults
    POST /v1/ask      {"question", "choices"?, "passages"?, "method"?, "rerank"?, "verify"?,
                      "k"?} -> the pipeline's Result.to_dict(), trace included
"""

from __future__ import annotations

import json
import math
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any
from urllib.parse import urlsplit

from faithrag.errors import FaithragError
from faithrag.server.errors import RequestError, status_for
from faithrag.server.service import AskService

DEFAULT_MAX_BODY_BYTES = 1 << 20
# An over-limit body is read and dropped up to this size so that the client, still sending,
# reads the 413 instead of a reset connection; beyond it the connection is just closed.
DISCARD_LIMIT_BYTES = 64 << 20
ROUTES: dict[str, dict[str, str]] = {  # path -> verb -> handler method
    "/": {"GET": "_inspector"},
    "/health": {"GET": "_health"},
    "/v1/methods": {"GET": "_methods"},
    "/v1/ask": {"POST": "_ask"},
}
# The page may run its own inline script and talk to this server only: no other origin, ever.
INSPECTOR_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                 "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'")


def _json_safe(value: Any) -> Any:
    """NaN and infinities as strings: JSON has no such numbers and browsers refuse them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


class FaithragServer(ThreadingHTTPServer):
    """One thread per connection; `service` does the work. Port 0 picks a free port."""

    daemon_threads = True

    def __init__(self, host: str, port: int, service: AskService,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
        self.service = service
        self.max_body_bytes = max_body_bytes
        self.inspector_page = (files("faithrag.server") / "inspector.html").read_bytes()
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: FaithragServer
    server_version = "faithrag"
    timeout = 60  # seconds a client may take to send its request

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _handle(self) -> None:
        path = urlsplit(self.path).path
        verbs = ROUTES.get(path, {})
        try:
            body = self._read_body()
            if not verbs:
                raise RequestError(404, f"No such path: {path}", f"Paths: {', '.join(ROUTES)}")
            if self.command not in verbs:
                raise RequestError(405, f"{self.command} is not allowed on {path}.",
                                   f"Use {', '.join(verbs)}.")
            getattr(self, verbs[self.command])(body)
        except FaithragError as exc:
            status = status_for(exc)
            self._send_json(status, {"error": exc.message, "hint": exc.hint},
                            {"Allow": ", ".join(verbs)} if status == 405 else None)
        except Exception as exc:  # noqa: BLE001 (one failed request must not stop the server)
            self.log_error("%s", traceback.format_exc())
            self._send_json(500, {"error": f"{type(exc).__name__}: {exc}",
                                  "hint": "The server log has the traceback."})

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise RequestError(411, "Chunked request bodies are not supported.",
                               "Send the body with a Content-Length header.")
        declared = self.headers.get("Content-Length") or "0"
        if not (declared.isascii() and declared.isdigit()):
            raise RequestError(400, f"Content-Length {declared!r} is not a byte count.")
        length = int(declared)
        try:
            if length <= self.server.max_body_bytes:
                return self.rfile.read(length)
            self._discard(min(length, DISCARD_LIMIT_BYTES))
        except TimeoutError:
            raise RequestError(408, "The request body did not arrive in time.") from None
        raise RequestError(413, f"The request body is {length} bytes, over the limit of "
                                f"{self.server.max_body_bytes}.",
                           "Send fewer or shorter passages, or restart the server with a larger "
                           "--max-body-bytes.")

    def _discard(self, length: int) -> None:
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                return
            length -= len(chunk)

    def _send(self, status: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, payload: Any,
                   headers: dict[str, str] | None = None) -> None:
        body = json.dumps(_json_safe(payload), ensure_ascii=False, default=str).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8", headers)

    def _inspector(self, body: bytes) -> None:
        self._send(200, self.server.inspector_page, "text/html; charset=utf-8",
                   {"Content-Security-Policy": INSPECTOR_CSP, "Cache-Control": "no-store"})

    def _health(self, body: bytes) -> None:
        self._send_json(200, self.server.service.health())

    def _methods(self, body: bytes) -> None:
        self._send_json(200, self.server.service.methods())

    def _ask(self, body: bytes) -> None:
        if not body.strip():
            raise RequestError(400, "The request body is empty.",
                               'Send JSON such as {"question": "Who founded X?"}.')
        try:
            payload = json.loads(body)
        except ValueError as exc:  # invalid JSON or not UTF-8
            raise RequestError(400, f"The request body is not valid JSON: {exc}",
                               "Send a JSON object with Content-Type: application/json.") from None
        self._send_json(200, self.server.service.ask(payload))

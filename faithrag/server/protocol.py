"""uvicorn's h11 HTTP protocol with the connection limits uvicorn lacks, enforced before a request
reaches the app (and so before its Host, Origin and token are known):

- a header deadline: a request's headers must be complete `Limits.header_seconds` after the
  connection opened or sent its last response; a client still sending them (one header line
  every few seconds, or nothing at all) is answered 408 and the connection closed;
- connection caps: a connection beyond `Limits.max_connections` open at once, or beyond
  `Limits.max_connections_per_client` from one client address, is answered 503 and closed as
  soon as it opens.

uvicorn's own `limit_concurrency` answers 503 only once a request's headers are complete, and
`timeout_keep_alive` stops counting at the first byte, so neither bounds a slow client.

    config = uvicorn.Config(app, http=guarded_protocol(Limits(header_seconds=5)))
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from faithrag.server.settings import Limits


def _raw_response(status: int, reason: str, error: str, hint: str) -> bytes:
    """A whole `{"error", "hint"}` response that closes the connection, written outside h11's
    request cycle (there is no request to answer yet)."""
    body = json.dumps({"error": error, "hint": hint}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n"
            "x-content-type-options: nosniff\r\n\r\n")
    return head.encode("latin-1") + body


class GuardedH11Protocol(H11Protocol):
    """H11Protocol with a header deadline and connection caps (see the module docstring). Make
    one with its limits through `guarded_protocol`."""

    limits: Limits = Limits()

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._waiting_cycle: object = None  # the cycle current when the deadline was armed

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        refusal = self._over_capacity()
        if refusal:
            self._refuse(503, "Service Unavailable", refusal,
                         "Close idle connections, retry later, or restart the server with a "
                         "larger --max-connections / --max-connections-per-client.")
            return
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not self._waiting_cycle:  # a request's headers are complete
            self._disarm_header_deadline()

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():
            self._arm_header_deadline()  # the next request's headers, on this connection
        super().on_response_complete()  # may start a pipelined request at once
        if self.cycle is not self._waiting_cycle:
            self._disarm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def _over_capacity(self) -> str:
        """Why this new connection is one too many, or ''."""
        limits = self.limits
        if len(self.connections) > limits.max_connections:
            return f"The server holds its limit of {limits.max_connections} open connections."
        address = self.client[0] if self.client else None
        same = sum(1 for other in self.connections
                   if (getattr(other, "client", None) or (None,))[0] == address)
        if same > limits.max_connections_per_client:
            return (f"This client holds the limit of {limits.max_connections_per_client} open "
                    "connections from one address.")
        return ""

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._waiting_cycle = self.cycle
        self._header_timer = self.loop.call_later(self.limits.header_seconds, self._headers_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        seconds = f"{self.limits.header_seconds:g}"
        self._refuse(408, "Request Timeout",
                     f"The request headers did not arrive within {seconds} s.",
                     f"Send the whole request head at once (the server closes connections "
                     f"whose headers take longer than --header-timeout, here {seconds} s).")

    def _refuse(self, status: int, reason: str, error: str, hint: str) -> None:
        if self.transport.is_closing():
            return
        self.logger.info("%s: %s", self.client and self.client[0], error)
        self.transport.write(_raw_response(status, reason, error, hint))
        self.transport.close()


def guarded_protocol(limits: Limits) -> type[GuardedH11Protocol]:
    """The protocol class to give uvicorn (`uvicorn.Config(http=...)`) for these limits."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})

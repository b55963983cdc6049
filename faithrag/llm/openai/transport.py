"""HTTP to an OpenAI-compatible server: one httpx client, a timeout on every attempt, retries
with back-off (tenacity), the errors a caller gets, and requests run a few at a time.

Connection errors, timeouts, 429 and 5xx are retried `max_retries` times with exponential
back-off and jitter (`backoff` × 2^(retry − 1) × a factor drawn from [0.5, 1.5); a numeric
Retry-After is honoured; at most MAX_BACKOFF seconds). When the attempts run out, a server that
never answered (or kept answering 429/502/503/504) gives ServerUnreachableError; one that kept
failing with another 5xx gives ServerRejectedError with its message, as does any 4xx at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from faithrag.errors import ServerRejectedError, ServerUnreachableError

MAX_BACKOFF = 30.0
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def error_message(response: httpx.Response) -> str:
    """The server's own explanation of a failed request, in the shapes servers use."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return str(error)[:500]
    return str(body)[:500]


def server_root(base_url: str) -> str:
    """The server's root URL: `base_url` without a trailing /v1 (where tokenize endpoints are)."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")


class _Retry(Exception):
    """An attempt worth retrying: what went wrong, its HTTP status (0: no answer), and the
    seconds its Retry-After asked for."""

    def __init__(self, reason: str, status: int = 0, retry_after: float = 0.0):
        super().__init__(reason)
        self.reason, self.status, self.retry_after = reason, status, retry_after


class Transport:
    """JSON requests to one server. `base_url` is the API root (with /v1), `root_url` the
    server's; `timeout` is per attempt (connecting capped at 10 s); `concurrency` bounds the
    requests `map` keeps in flight (and the client's connections, with 2 to spare)."""

    def __init__(self, base_url: str, api_key: str, timeout: float, max_retries: int,
                 backoff: float, concurrency: int, transport: httpx.BaseTransport | None):
        self.base_url = base_url.rstrip("/")
        self.root_url = server_root(self.base_url)
        self._timeout = timeout
        self._max_retries = max_retries
        self._backoff = backoff
        self._concurrency = concurrency
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            headers=headers,
            # no pool timeout: callers sharing the client queue for a connection, and that
            # wait is not the server's silence
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0), pool=None),
            limits=httpx.Limits(max_connections=concurrency + 2),
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, url: str, payload: dict[str, Any] | None = None) -> Any:
        """The JSON body of the server's answer to `method url` with `payload`, retried as the
        module docstring says; ServerRejectedError or ServerUnreachableError otherwise."""
        attempts = self._max_retries + 1
        retrying = Retrying(stop=stop_after_attempt(attempts), wait=self._wait,
                            retry=retry_if_exception_type(_Retry), reraise=True)
        try:
            return retrying(self._attempt, method, url, payload)
        except _Retry as last:
            if last.status and last.status not in (429, 502, 503, 504):
                raise ServerRejectedError(
                    f"{url} kept failing after {attempts} attempts (last: {last.reason}).",
                    "The server is up but fails on this request; see its log.") from None
            raise ServerUnreachableError(
                f"The server at {url} did not answer after {attempts} attempts (last: "
                f"{last.reason}).", "Start the server or check --base-url (and the timeout).") \
                from None

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next attempt: the back-off, or the Retry-After asked for."""
        failure = state.outcome.exception() if state.outcome is not None else None
        delay = self._backoff * 2 ** (state.attempt_number - 1) * (0.5 + random.random())
        return min(MAX_BACKOFF, max(delay, getattr(failure, "retry_after", 0.0)))

    def _attempt(self, method: str, url: str, payload: dict[str, Any] | None) -> Any:
        """One attempt: the JSON answer, _Retry for what is worth another, else the error."""
        try:
            response = self._client.request(method, url, json=payload)
        except httpx.TimeoutException:
            raise _Retry(f"no answer within {self._timeout:g} s") from None
        except httpx.TransportError as exc:
            raise _Retry(f"connection failed: {exc}") from None
        status = response.status_code
        if status == 429 or status >= 500:
            header = response.headers.get("retry-after", "")
            raise _Retry(f"HTTP {status}: {error_message(response)}", status,
                         float(header) if header.replace(".", "", 1).isdigit() else 0.0)
        if status >= 400:
            raise ServerRejectedError(
                f"{url} rejected the request (HTTP {status}): {error_message(response)}",
                "The server does not accept a parameter or value this request used; see its "
                "message (and its log).")
        try:
            return response.json()
        except ValueError as exc:
            raise ServerRejectedError(
                f"{url} answered HTTP {status} with a body that is not JSON: "
                f"{response.text[:200]!r}",
                "Check that --base-url points at an OpenAI-compatible API (usually ending "
                "in /v1).") from exc

    def probe(self, method: str, url: str, payload: dict[str, Any] | None = None) -> Any:
        """A request for an optional endpoint: None when the server refuses it (4xx)."""
        try:
            return self.request(method, url, payload)
        except ServerRejectedError:
            return None

    def map(self, fn: Callable[[_Item], _Result], items: list[_Item]) -> list[_Result]:
        """`fn` of each item, `concurrency` at once, in input order."""
        if len(items) <= 1 or self._concurrency == 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self._concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

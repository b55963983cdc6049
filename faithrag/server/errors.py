"""Which HTTP status answers which error. The body is always `{"error": ..., "hint": ...}`."""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import Response

from faithrag.errors import (
    ConfigError,
    DataError,
    EmptyIndexError,
    FaithragError,
    InputError,
    InputTooLargeError,
    MissingExtraError,
    ModelNotFoundError,
    RuntimeUnavailableError,
    ServerRejectedError,
    ServerUnreachableError,
    WorkerDiedError,
)


class RequestError(FaithragError):
    """The HTTP request itself is wrong (body, field, path, verb, size or time); `status` says
    how."""

    def __init__(self, status: int, message: str, hint: str = ""):
        super().__init__(message, hint)
        self.status = status


# Input and configuration mistakes are the client's (or the operator's) to fix: 4xx. A model
# server that refused or did not answer, or a runtime that cannot load: 502/503.
STATUS_BY_ERROR: tuple[tuple[type[FaithragError], int], ...] = (
    (ConfigError, 400),
    (DataError, 400),
    (EmptyIndexError, 400),
    (InputError, 400),
    (InputTooLargeError, 422),
    (ServerRejectedError, 502),
    (ServerUnreachableError, 503),
    (ModelNotFoundError, 503),
    (MissingExtraError, 503),
    (RuntimeUnavailableError, 503),
    (WorkerDiedError, 503),
)


def status_for(error: FaithragError) -> int:
    if isinstance(error, RequestError):
        return error.status
    return next((status for kind, status in STATUS_BY_ERROR if isinstance(error, kind)), 500)


def json_safe(value: Any) -> Any:
    """NaN and infinities as strings: JSON has no such numbers and browsers refuse them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class JSONBody(Response):
    """JSON in UTF-8 as it is written (no ASCII escapes), non-finite numbers as strings."""

    media_type = "application/json; charset=utf-8"

    def render(self, content: Any) -> bytes:
        return json.dumps(json_safe(content), ensure_ascii=False, default=str).encode("utf-8")


# The OpenAI-compatible routes answer errors in OpenAI's shape, which its clients read.
OPENAI_PATHS = ("/v1/chat/completions", "/v1/models")
OPENAI_PREFIXES = ("/v1/models/",)


def openai_error(status: int, error: str, hint: str = "") -> dict[str, Any]:
    kind = {401: "authentication_error", 403: "permission_error",
            404: "not_found_error"}.get(status, "server_error" if status >= 500
                                        else "invalid_request_error")
    return {"error": {"message": f"{error} {hint}".strip(), "type": kind, "param": None,
                      "code": status, "hint": hint}}


def error_response(status: int, error: str, hint: str = "",
                   headers: dict[str, str] | None = None, path: str = "") -> JSONBody:
    """`{"error": ..., "hint": ...}`; on the OpenAI-compatible paths, OpenAI's
    `{"error": {"message": ..., "type": ..., "code": ...}}` with the hint in it."""
    openai_shape = path in OPENAI_PATHS or path.startswith(OPENAI_PREFIXES)
    body = openai_error(status, error, hint) if openai_shape else {"error": error, "hint": hint}
    return JSONBody(body, status, headers)

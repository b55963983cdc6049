"""Which HTTP status answers which error. The body is always `{"error": ..., "hint": ...}`."""

from __future__ import annotations

from faithrag.errors import (
    ConfigError,
    DataError,
    EmptyIndexError,
    FaithragError,
    InputError,
    InputTooLargeError,
    ModelNotFoundError,
    RuntimeUnavailableError,
    ServerRejectedError,
    ServerUnreachableError,
    WorkerDiedError,
)


class RequestError(FaithragError):
    """The HTTP request itself is wrong (body, field, path or verb); `status` says how."""

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
    (RuntimeUnavailableError, 503),
    (WorkerDiedError, 503),
)


def status_for(error: FaithragError) -> int:
    if isinstance(error, RequestError):
        return error.status
    return next((status for kind, status in STATUS_BY_ERROR if isinstance(error, kind)), 500)

"""Every typed error has a deliberate HTTP status: the client's mistakes 4xx, an unavailable
model 5xx."""

from __future__ import annotations

import inspect

from faithrag import errors
from faithrag.server.errors import STATUS_BY_ERROR, RequestError, status_for


def test_every_faithrag_error_type_has_a_status():
    kinds = {obj for _, obj in inspect.getmembers(errors, inspect.isclass)
             if issubclass(obj, errors.FaithragError) and obj is not errors.FaithragError}
    assert kinds == {kind for kind, _ in STATUS_BY_ERROR}


def test_statuses():
    assert status_for(errors.ConfigError("bad k")) == 400
    assert status_for(errors.ServerUnreachableError("down")) == 503
    assert status_for(errors.ServerRejectedError("refused")) == 502
    assert status_for(errors.FaithragError("other")) == 500
    assert status_for(RequestError(413, "too big")) == 413

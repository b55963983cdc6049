from __future__ import annotations

import pytest

from faithrag.errors import ModelNotFoundError
from faithrag.llm.models import resolve_model


@pytest.fixture(scope="session")
def tiny_gguf():
    """Path of the tiny packaged model; skips the test when it is not assembled."""
    try:
        return resolve_model("tiny")
    except ModelNotFoundError as exc:
        pytest.skip(f"tiny model not assembled ({exc.message}); run `make models-tiny`")

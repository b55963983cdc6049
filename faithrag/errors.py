"""Typed errors. Each says what is wrong and what to do; the CLI prints them without a traceback."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence


class FaithragError(Exception):
    """Base class. `hint` tells the user what to do about it."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  -> {self.hint}" if self.hint else self.message


class ConfigError(FaithragError):
    """A configuration value is missing or invalid."""


class ModelNotFoundError(FaithragError):
    """A model preset or path cannot be resolved to a verified GGUF file."""


class RuntimeUnavailableError(FaithragError):
    """An inference runtime (llama-cpp-python, torch, ...) is not installed or cannot load."""


class MissingExtraError(RuntimeUnavailableError):
    """A feature needs an optional extra that is not installed (the core install leaves out
    everything compiled or heavy: llama.cpp, FAISS/ONNX, torch, matplotlib, LanceDB, Ray).

    `MissingExtraError("dense retrieval", "dense")` reads "dense retrieval needs the optional
    extra 'dense', which is not installed." with the hint `pip install 'faithrag[dense]'`.
    `note` adds a sentence to the message (what failed to import, a platform caveat)."""

    def __init__(self, feature: str, extra: str, note: str = ""):
        message = f"{feature} needs the optional extra '{extra}', which is not installed."
        super().__init__(f"{message} {note}" if note else message,
                         f"pip install 'faithrag[{extra}]'")
        self.feature = feature
        self.extra = extra


def require_modules(feature: str, extra: str, modules: Sequence[str]) -> None:
    """MissingExtraError(feature, extra) when one of `modules` is not installed; nothing is
    imported (a module set to None in sys.modules counts as missing: its import would fail)."""
    def installed(module: str) -> bool:
        if module in sys.modules:
            return sys.modules[module] is not None
        return importlib.util.find_spec(module) is not None
    if not all(installed(module) for module in modules):
        raise MissingExtraError(feature, extra)


class ServerUnreachableError(FaithragError):
    """An OpenAI-compatible server did not answer after the configured retries."""


class ServerRejectedError(FaithragError):
    """A server answered but refused the request (bad parameter, unsupported feature)."""


class EmptyIndexError(FaithragError):
    """An index directory is missing, empty or inconsistent."""


class InputTooLargeError(FaithragError):
    """An input cannot fit the model's context window even after evidence was truncated."""


class DataError(FaithragError):
    """A dataset file or line is malformed."""


class WorkerDiedError(FaithragError):
    """A batch worker (a Ray actor) died or could not start."""


class InputError(FaithragError):
    """A question or passage given to a pipeline is unusable (empty, malformed)."""

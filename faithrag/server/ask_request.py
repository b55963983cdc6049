"""The body of `POST /v1/ask`, checked field by field before any model work is done."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faithrag import registry
from faithrag.server.errors import RequestError
from faithrag.types import Passage, Question

FIELDS = ("question", "choices", "passages", "method", "rerank", "verify", "k")
PASSAGE_FIELDS = ("id", "title", "text")
EXAMPLE = ('For example: {"question": "Who founded X?", "choices": ["A", "B"], '
           '"passages": [{"title": "X", "text": "..."}], "method": "vanilla"}')


@dataclass(frozen=True)
class PipelineChoice:
    """What a pipeline is built from; requests with the same choice share one pipeline."""

    method: str
    rerank: str | None
    verify: str | None
    k: int


@dataclass
class AskRequest:
    question: Question
    passages: list[Passage] | None  # None: retrieve from the server's index
    choice: PipelineChoice


def _bad(message: str, hint: str = EXAMPLE) -> RequestError:
    return RequestError(400, message, hint)


def _registered(field: str, value: Any, registry: dict[str, Any], optional: bool = False) -> str:
    if isinstance(value, str) and value in registry:
        return value
    names = ", ".join(sorted(registry))
    raise _bad(f"Unknown {field} {value!r}.",
               f"Choose one of: {names}" + (", or null for none." if optional else "."))


def _optional_stage(field: str, value: Any, registry: dict[str, Any]) -> str | None:
    return None if value is None else _registered(field, value, registry, optional=True)


def _choices(value: Any) -> list[str] | None:
    if value is None:
        return None
    if (not isinstance(value, list) or len(value) < 2
            or not all(isinstance(c, str) and c.strip() for c in value)):
        raise _bad("'choices' must be a list of at least two non-empty strings.")
    return value


def _passage(number: int, value: Any) -> Passage:
    if not isinstance(value, dict):
        raise _bad(f"passages[{number - 1}] must be an object with a 'text'.")
    unknown = sorted(set(value) - set(PASSAGE_FIELDS))
    if unknown:
        raise _bad(f"passages[{number - 1}] has unknown field(s): {', '.join(unknown)}.",
                   f"A passage has: {', '.join(PASSAGE_FIELDS)}.")
    text, pid, title = value.get("text"), value.get("id", f"p{number}"), value.get("title", "")
    if not isinstance(text, str) or not text.strip():
        raise _bad(f"passages[{number - 1}].text must be a non-empty string.")
    if not isinstance(pid, str) or not pid.strip() or not isinstance(title, str):
        raise _bad(f"passages[{number - 1}]: 'id' must be a non-empty string and 'title' a "
                   "string.")
    return Passage(id=pid, text=text, title=title, source="request")


def _passages(value: Any) -> list[Passage] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _bad("'passages' must be a list of objects with a 'text'.")
    passages = [_passage(number, item) for number, item in enumerate(value, 1)]
    ids = [p.id for p in passages]
    if len(set(ids)) != len(ids):
        raise _bad("Passage ids must be unique.", "Leave 'id' out to number them p1, p2, …")
    return passages


def _k(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(f"'k' must be a positive integer, got {value!r}.")
    return value


def parse_ask_request(body: Any, defaults: PipelineChoice) -> AskRequest:
    """Fields left out take the server's defaults; `"rerank": null` switches a stage off."""
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise _bad(f"Unknown field(s): {', '.join(unknown)}.", f"Allowed: {', '.join(FIELDS)}.")
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        raise _bad("'question' must be a non-empty string.")
    choice = PipelineChoice(
        method=_registered("method", body.get("method", defaults.method), registry.names("generator")),
        rerank=_optional_stage("rerank", body.get("rerank", defaults.rerank), registry.names("reranker")),
        verify=_optional_stage("verify", body.get("verify", defaults.verify), registry.names("verifier")),
        k=_k(body.get("k", defaults.k)),
    )
    return AskRequest(Question(question.strip(), choices=_choices(body.get("choices"))),
                      _passages(body.get("passages")), choice)

"""The body of `POST /v1/ask` as one typed model, and its checks against the registered stages
and the server's limits, all before any model work is done.

    body = AskBody.model_validate({"question": "Who founded X?", "passages": [{"text": "..."}]})
    request = to_ask_request(body, defaults, registered_stages(), Limits())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from pydantic import BaseModel, ConfigDict, Field

from faithrag.config import PipelineConfig
from faithrag.server.errors import RequestError
from faithrag.server.settings import Limits
from faithrag.server.stages import Stages
from faithrag.types import Passage, Question

MAX_CHOICES = 26  # options are lettered A-Z in prompts
# what an answer does about a conflict a stage reports (pipeline.on_conflict)
ON_CONFLICT: tuple[str, ...] = get_args(PipelineConfig.model_fields["on_conflict"].annotation)


class PassageIn(BaseModel):
    """One passage of evidence supplied with the request."""

    model_config = ConfigDict(extra="forbid", strict=True)
    id: str | None = Field(None, min_length=1,
                           description="Unique within the request; p1, p2, … when left out.")
    title: str = ""
    text: str = Field(min_length=1, pattern=r"\S")


class AskBody(BaseModel):
    """A question, optionally with its options and its evidence. Left out, `method`, `rerank`,
    `verify`, `detect`, `on_conflict` and `k` take the server's defaults; `"rerank": null`,
    `"verify": null` or `"detect": null` switches that stage off. Without `passages` the server
    retrieves `k` from its index."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{
        "question": "When did the Aldermoor Bridge open?", "choices": ["1887", "1901"],
        "passages": [{"title": "Aldermoor", "text": "The Aldermoor Bridge opened in 1887."}],
        "method": "vanilla", "rerank": None}]})
    question: str = Field(min_length=1, pattern=r"\S")
    choices: list[str] | None = Field(None, min_length=2, max_length=MAX_CHOICES)
    passages: list[PassageIn] | None = None
    method: str | None = None
    rerank: str | None = None
    verify: str | None = None
    detect: str | None = Field(None, description="A conflict detector (GET /v1/methods lists "
                               "them): reports the conflicts the evidence holds, changes nothing.")
    on_conflict: str | None = Field(None, json_schema_extra={"enum": [*ON_CONFLICT, None]},
                                    description="What the answer does when a stage reports a "
                                    "conflict; left out or null: the server's default.")
    k: int | None = Field(None, ge=1)


@dataclass(frozen=True)
class PipelineChoice:
    """What a pipeline is built from; requests with the same choice share one pipeline."""

    method: str
    rerank: str | None
    verify: str | None
    k: int
    detect: str | None = None
    on_conflict: str = "resolve"


@dataclass
class AskRequest:
    question: Question
    passages: list[Passage] | None  # None: retrieve from the server's index
    choice: PipelineChoice


def _registered(field: str, value: str, names: tuple[str, ...], optional: bool) -> str:
    if value in names:
        return value
    if not names:
        raise RequestError(400, f"Unknown {field} {value!r}.",
                           f"None is registered on this server: send \"{field}\": null.")
    raise RequestError(400, f"Unknown {field} {value!r}.",
                       f"Choose one of: {', '.join(names)}"
                       + (", or null for none." if optional else "."))


def pipeline_choice(body: AskBody, defaults: PipelineChoice, stages: Stages) -> PipelineChoice:
    given = body.model_fields_set
    rerank = body.rerank if "rerank" in given else defaults.rerank
    verify = body.verify if "verify" in given else defaults.verify
    detect = body.detect if "detect" in given else defaults.detect
    return PipelineChoice(
        method=_registered("method", body.method or defaults.method, stages.methods, False),
        rerank=None if rerank is None else _registered("rerank", rerank, stages.rerankers, True),
        verify=None if verify is None else _registered("verify", verify, stages.verifiers, True),
        k=body.k or defaults.k,
        detect=None if detect is None else _registered("detect", detect, stages.detectors, True),
        on_conflict=_registered("on_conflict", defaults.on_conflict if body.on_conflict is None
                                else body.on_conflict, ON_CONFLICT, False))


def _check_limits(body: AskBody, limits: Limits) -> None:
    def too_large(message: str, flag: str) -> RequestError:
        return RequestError(413, message, f"Send less, or restart the server with a larger {flag}.")
    if len(body.question) > limits.max_question_chars:
        raise too_large(f"The question is {len(body.question)} characters, over the limit of "
                        f"{limits.max_question_chars}.", "--max-question-chars")
    passages = body.passages or []
    if len(passages) > limits.max_passages:
        raise too_large(f"{len(passages)} passages were sent, over the limit of "
                        f"{limits.max_passages}.", "--max-passages")
    for number, passage in enumerate(passages):
        if len(passage.text) > limits.max_passage_chars:
            raise too_large(f"passages[{number}].text is {len(passage.text)} characters, over "
                            f"the limit of {limits.max_passage_chars}.", "--max-passage-chars")


def _passages(items: list[PassageIn] | None) -> list[Passage] | None:
    if items is None:
        return None
    passages = [Passage(id=item.id or f"p{number}", text=item.text, title=item.title,
                        source="request") for number, item in enumerate(items, 1)]
    ids = [p.id for p in passages]
    if len(set(ids)) != len(ids):
        raise RequestError(400, "Passage ids must be unique.",
                           "Leave 'id' out to number them p1, p2, …")
    return passages


def to_ask_request(body: AskBody, defaults: PipelineChoice, stages: Stages,
                   limits: Limits) -> AskRequest:
    """The checked request; raises RequestError (400 or 413) on a bad one."""
    _check_limits(body, limits)
    choices = body.choices
    if choices is not None and not all(c.strip() for c in choices):
        raise RequestError(400, "'choices' must be non-empty strings.",
                           'For example: "choices": ["1887", "1901"].')
    return AskRequest(Question(body.question.strip(), choices=choices), _passages(body.passages),
                      pipeline_choice(body, defaults, stages))

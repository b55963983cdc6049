"""The body of `POST /v1/ask` as one typed model, and its checks against the registered stages
and the server's limits, all before any model work is done.

    body = AskBody.model_validate({"question": "Who founded X?", "passages": [{"text": "..."}]})
    request = to_ask_request(body, defaults, registered_stages(), Limits())
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model

from faithrag import registry
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


class _Question(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{
        "question": "When did the Aldermoor Bridge open?", "choices": ["1887", "1901"],
        "passages": [{"title": "Aldermoor", "text": "The Aldermoor Bridge opened in 1887."}],
        "method": "vanilla", "rerank": None}]})
    question: str = Field(min_length=1, pattern=r"\S")
    choices: list[str] | None = Field(None, min_length=2, max_length=MAX_CHOICES)
    passages: list[PassageIn] | None = None


def stage_fields(kinds: tuple[registry.StageKind, ...]) -> dict[str, tuple[Any, Any]]:
    """A request field per stage kind of `kinds` (its `key`): the name of a registered stage
    of that kind, or null."""
    return {entry.key: (str | None, Field(None, description=(
        f"The {entry.label} (GET /v1/methods lists them under \"{entry.listing}\"); left out: "
        "the server's default" + ("; null: none." if entry.optional else "."))))
        for entry in kinds}


AskBody = create_model(
    "AskBody", __base__=_Question, __module__=__name__,
    __doc__="""A question, optionally with its options and its evidence. Left out, the stage
    fields (one per stage kind of faithrag.registry.KINDS: `method`, `rerank`, ...),
    `on_conflict` and `k` take the server's defaults; null for an optional stage (`"rerank":
    null`) switches it off. Without `passages` the server retrieves `k` from its index.""",
    **stage_fields(registry.KINDS),
    on_conflict=(str | None, Field(None, json_schema_extra={"enum": [*ON_CONFLICT, None]},
                                   description="What the answer does when a stage reports a "
                                   "conflict; left out or null: the server's default.")),
    k=(int | None, Field(None, ge=1)))


@dataclass(frozen=True)
class PipelineChoice:
    """What a pipeline is built from; requests with the same choice share one pipeline.
    `stages` is (kind, stage name or None) for every kind of registry.KINDS, in its order."""

    stages: tuple[tuple[str, str | None], ...]
    k: int
    on_conflict: str = "resolve"

    @classmethod
    def of(cls, names: Mapping[str, str | None], k: int,
           on_conflict: str = "resolve") -> PipelineChoice:
        """The choice of the stages `names` (by kind; a kind left out runs none)."""
        return cls(tuple((entry.kind, names.get(entry.kind)) for entry in registry.KINDS), k,
                   on_conflict)

    def name(self, kind: str) -> str | None:
        """The stage of `kind` this choice runs (None: none)."""
        return dict(self.stages)[kind]


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
    """The stages `body` names, each checked against `stages`; a field left out takes the
    default's, and so does null for a kind that always runs (the generator)."""
    given = body.model_fields_set
    names: dict[str, str | None] = {}
    for entry in registry.KINDS:
        value = getattr(body, entry.key)
        if not entry.optional:
            value = value or defaults.name(entry.kind)
        elif entry.key not in given:
            value = defaults.name(entry.kind)
        names[entry.kind] = None if value is None else _registered(
            entry.key, value, stages[entry.kind], entry.optional)
    return PipelineChoice.of(names, body.k or defaults.k, _registered(
        "on_conflict", defaults.on_conflict if body.on_conflict is None else body.on_conflict,
        ON_CONFLICT, False))


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

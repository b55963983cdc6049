"""Stage protocols. A pipeline is retrieve -> rerank -> generate -> verify -> detect; each stage
takes plain data, returns plain data and writes what it did into the trace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from faithrag.retrieval.retriever import Retriever
from faithrag.types import Answer, Conflict, Passage, Question, Trace

__all__ = ["Detector", "Generator", "RemovedPassage", "RerankResult", "Reranker", "Retriever", "Verifier"]


@dataclass
class RemovedPassage:
    passage: Passage
    reason: str


@dataclass
class RerankResult:
    passages: list[Passage]
    removed: list[RemovedPassage] = field(default_factory=list)


@runtime_checkable
class Reranker(Protocol):
    name: str

    def rerank(self, question: Question, passages: list[Passage], trace: Trace) -> RerankResult: ...


@runtime_checkable
class Generator(Protocol):
    name: str

    def generate(self, question: Question, passages: list[Passage], trace: Trace) -> Answer: ...


@runtime_checkable
class Verifier(Protocol):
    name: str

    def verify(self, question: Question, passages: list[Passage], answer: Answer,
               trace: Trace) -> Answer: ...


@runtime_checkable
class Detector(Protocol):
    """Reports the conflicts in the evidence of an answer (on its trace step) and returns them;
    changes neither the passages nor the answer."""

    name: str

    def detect(self, question: Question, passages: list[Passage], answer: Answer,
               trace: Trace) -> list[Conflict]: ...

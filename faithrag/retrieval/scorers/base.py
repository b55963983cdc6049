"""The RelevanceScorer protocol: how relevant is each passage to a query."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from faithrag.types import Step


@runtime_checkable
class RelevanceScorer(Protocol):
    name: str

    def score(self, query: str, passages: Sequence[str], step: Step | None = None) -> list[float]:
        """One score per passage, higher = more relevant: a probability in [0, 1] (LLM judge,
        cross-encoder) or a cosine similarity (bi-encoder). Scorers that call an LLM record
        their calls in `step` when one is given."""
        ...

"""The hostile-retrieval harness: a test harness that wraps any retriever and puts poisoned
passages into its top-k. It simulates an attacked corpus for evaluation; it is not part of any
method, and nothing in the pipeline knows it is there.

For a query with poison (looked up by the query text), the wrapped retriever's top-k is fetched,
the first `count` poisoned passages are inserted so that they end up at `positions` (0 = the
top), and the list is cut back to k: clean passages are pushed down and, past k, out. A poisoned
passage takes the score of the clean passage it displaces, so scores give it away no more than
its rank does; `meta["poisoned"] = True` marks it for scoring and inspection only (methods never
read passage meta). Queries without poison get the wrapped retriever's results unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from faithrag.errors import ConfigError
from faithrag.retrieval.retriever import Retriever
from faithrag.types import Passage

PoisonSource = Mapping[str, Sequence[Passage]] | Callable[[str], Sequence[Passage]]


class HostileRetriever:
    def __init__(self, base: Retriever, poison: PoisonSource, count: int | None = None,
                 positions: Sequence[int] | None = None):
        """`count`: how many of a query's poisoned passages to inject (None: all, or as many as
        `positions` when given). `positions`: the ranks they take, in order (default: the top
        ranks 0, 1, ...); they must be distinct and non-negative."""
        if count is not None and count < 0:
            raise ConfigError(f"poison count must be >= 0, got {count}", "Pass 0 or more.")
        if positions is not None:
            positions = list(positions)
            if len(set(positions)) != len(positions) or any(p < 0 for p in positions):
                raise ConfigError(f"poison positions must be distinct and >= 0, got {positions}",
                                  "Give ranks like 0 2 4 (0 = the top).")
            if count is not None and count > len(positions):
                raise ConfigError(f"{count} poisoned passages but only {len(positions)} "
                                  "positions.", "Give one position per poisoned passage.")
            if count is None:
                count = len(positions)
        self.base = base
        self._poison_for = poison if callable(poison) else (lambda q: poison.get(q, ()))
        self.count = count
        self.positions = positions

    def retrieve(self, query: str, k: int) -> list[Passage]:
        poison = list(self._poison_for(query))[: self.count]
        clean = self.base.retrieve(query, k)
        if not poison:
            return clean
        texts = {p.text for p in poison}
        clean = [p for p in clean if p.text not in texts]
        positions = self.positions or list(range(len(poison)))
        result = list(clean)
        for position, passage in sorted(zip(positions, poison), key=lambda pair: pair[0]):
            at = min(position, len(result))
            displaced = result[at].score if at < len(result) else (
                result[-1].score if result else None)
            result.insert(at, Passage(passage.id, passage.text, passage.title, passage.source,
                                      displaced, {**passage.meta, "poisoned": True}))
        return result[:k]

"""Several loaded copies of one embedded model behind the LLM protocol, for concurrent callers.

A llama.cpp context decodes one sequence at a time, and on a CPU several contexts with few
threads each get more done than one context with all of them (their threads spin-wait for each
other). `Replicas` holds N copies; each call takes a free copy, waiting when all are busy, so
`faithrag eval --workers N` evaluates N items at once in one process and one run directory.
Every embedded call starts from an empty cache (or a snapshot that is bit for bit the same on
each copy), so its result does not depend on which copy served it. Which copy serves a call only
matters for speed: a caller thread gets the copy it used last whenever that one is free, so the
prefix snapshots a copy made for an item's earlier calls (`llm.prefix_cache`) serve its later
ones; with as many workers as copies each worker keeps one copy."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from faithrag.llm.base import LLM
from faithrag.llm.delegating import DelegatingLLM


class Replicas(DelegatingLLM):
    def __init__(self, copies: Sequence[LLM]):
        if not copies:
            raise ValueError("Replicas needs at least one model.")
        if len({copy.name for copy in copies}) != 1:
            raise ValueError("Replicas must be copies of one model, got "
                             f"{sorted({copy.name for copy in copies})}.")
        super().__init__(copies[0])  # tokenizer questions have the same answer on every copy
        self.copies = list(copies)
        self._free = list(self.copies)
        self._returned = threading.Condition()
        self._last = threading.local()  # the copy this thread used last

    @contextmanager
    def _serving(self) -> Iterator[LLM]:
        """A free copy, waiting when all are busy; the one this thread used last if it is free."""
        with self._returned:
            self._returned.wait_for(lambda: self._free)
            last = getattr(self._last, "copy", None)
            copy = last if any(c is last for c in self._free) else self._free[0]
            self._free = [c for c in self._free if c is not copy]
        self._last.copy = copy
        try:
            yield copy
        finally:
            with self._returned:
                self._free.append(copy)
                self._returned.notify()

    def close(self) -> None:
        for copy in self.copies:
            close = getattr(copy, "close", None)
            if close is not None:
                close()

"""Injected distractors for robustness sweeps (`faithrag eval --distractors N`).

For an item, the distractors are the N passages of OTHER items of the same set that are most
similar to its question and do not answer it:
- similar: BM25 over every distinct passage of the set (title + text), queried with the
  question; ranked by BM25 score, ties in file order — deterministic, no RNG;
- from another item: a passage whose text is one of the item's own passages, or that belongs to
  the item, is never a distractor;
- not answering: a passage that contains any gold alias of the item (SQuAD-normalised
  whole-token containment, title included) is skipped, and so is one that contains it in smart
  EM's canonical form ("two moons" for gold "2", "20 July 1969" for "July 20, 1969"), since the
  CF-RAG benchmarks score with smart EM.
The lists are nested (the 2 chosen for N=2 are the first 2 of the 4 chosen for N=4), so a
sweep over N measures only the added distraction. Distractors get ids `<item id>#d<i>`, source
"distractor" and `meta["injected"] = True`; they are appended after the item's own passages."""

from __future__ import annotations

from faithrag.answers import canonical_answer, containment
from faithrag.eval.datasets import Dataset, QAItem
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.retrieval.searcher import index_text
from faithrag.types import Passage


class DistractorPool:
    def __init__(self, dataset: Dataset):
        owners: dict[str, set[str]] = {}
        first: dict[str, Passage] = {}
        for item in dataset.items:
            for p in item.passages():
                owners.setdefault(p.text, set()).add(item.id)
                first.setdefault(p.text, p)
        self._owners = owners
        self._passages = list(first.values())
        self._retriever = InMemoryRetriever(self._passages, mode="bm25")

    def select(self, item: QAItem, n: int) -> list[Passage]:
        if n <= 0:
            return []
        own = {p.text for p in item.passages()}
        chosen: list[Passage] = []
        depth = 4 * n + 20
        while True:
            hits = self._retriever.retrieve(item.question, depth)
            chosen = [p for p in hits
                      if item.id not in self._owners[p.text] and p.text not in own
                      and not gives_answer(index_text(p), item.answers)][:n]
            if len(chosen) == n or depth >= len(self._passages):
                break
            depth *= 4
        return [Passage(id=f"{item.id}#d{i}", text=p.text, title=p.title, source="distractor",
                        score=None, meta={"injected": True, "from": p.id})
                for i, p in enumerate(chosen)]


def gives_answer(text: str, answers: list[str]) -> bool:
    """Whether `text` contains a gold alias as written or in smart EM's canonical form."""
    return containment(text, answers) or containment(
        canonical_answer(text), [canonical_answer(a) for a in answers])

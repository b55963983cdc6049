"""Re-ranking that removes passages likely injected into the retrieval, with no trusted source
and no LLM call (`rerank = "poison_filter"`).

The passages and the question are embedded with the retrieval's embedder; then two signs of
injection are looked for (faithrag.methods.poison_signals):
- a **crafted cluster**: several passages written alike for the question. Its members are
  removed, but only when some passage lies outside it: a retrieval whose passages all agree
  has nothing to compare them with and is left alone. With `window_words`, passages are also
  read in overlapping windows of that many words, so that a stretch written for the question
  and set inside longer real text clusters with its copies (more embeddings per passage).
- **altered copies**: passages that are one text with a stretch replaced. A version whose
  replaced words another passage of the retrieval (outside the copy group) also states is
  backed. When every version is backed (two real pages of one template), all are kept and the
  conflict is reported (action "kept"). Otherwise every version is removed, and with them the
  passages that back one: an injector can place a backing passage as easily as the copy, so
  backing never decides which version is the original (the filter takes no side).
Passages keep their incoming order; a removed passage's reason names the signal and the
passages it shares it with. With `top_k`, only the first `top_k` passages left are passed on
(as a ranker's `top_k` does): retrieve more passages than an attacker can place (the
retriever's k above `top_k`), so that removing the injected ones leaves clean passages to
answer from. The passages below the cut are named on the step (`below_top_k`), not removed.
Each group found is one `poisoning_suspected` conflict (action "removed", or "kept" when every
version is backed): for a cluster one side quoting its passages, for altered copies one side
per version whose answer is its replaced words. A retrieval of fewer than two passages is left
alone. An embedder that fails is a warning and a `could_not_tell` check on the step; altered
copies, which need no embedding, are still removed.

With a verifier (`verify = "antisyco"`) the filter runs first and the verifier checks the
answer from what is left against the trusted knowledge base. Without one, a retrieval the filter
removes entirely gets no answer from the model's memory (`Pipeline.run`: the answer is withheld).

Example:
    >>> from faithrag.types import Passage, Question, Trace
    >>> real = Passage("p1", "The house was built in 1912 for David and Mary Jones, who lived there.")
    >>> fake = Passage("p2", "The house was built in 1895 for David and Mary Jones, who lived there.")
    >>> other = Passage("p3", "Spanish Fork is a city in Utah County.")
    >>> flt = PoisonFilter(embedder=None)
    >>> result = flt.rerank(Question("When was the house built?"), [real, fake, other], Trace())
    >>> [p.id for p in result.passages], [r.passage.id for r in result.removed]
    (['p3'], ['p1', 'p2'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from faithrag.llm.base import LLM
from faithrag.methods.base import RemovedPassage, RerankResult
from faithrag.methods.conflicts import excerpt, passages_side
from faithrag.methods.poison_signals import (
    CopySettings,
    altered_copies,
    connected_groups,
    crafted_clusters,
    merged_groups,
    windowed_clusters,
    windows,
    words,
)
from faithrag.registry import register
from faithrag.sections import Section, section
from faithrag.types import Conflict, ConflictCheck, ConflictSide, Passage, Question, Step, Trace

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.embedder import Embedder
    from faithrag.retrieval.retriever import Retriever

KIND = "poisoning_suspected"
DEFAULT_COPIES = CopySettings()


class PoisonFilter:
    name = "poison_filter"

    def __init__(self, embedder: Embedder | None, *, similarity: float = 0.8,
                 query_similarity: float = 0.55, min_cluster: int = 3,
                 halo_similarity: float = 0.6,
                 copies: CopySettings | None = DEFAULT_COPIES, top_k: int | None = None,
                 window_words: int | None = None, window_stride: int = 8,
                 window_similarity: float = 0.75, window_halo: float | None = 0.6):
        """`embedder`: embeds the question and the passages for the cluster signal (None: no
        cluster is looked for); `copies`: how altered copies are told (None: they are not
        looked for); `top_k`: how many of the passages left to pass on (None: all);
        `window_words`: also cluster overlapping windows of this many words, one every
        `window_stride` words, linked at `window_similarity`, with a halo at `window_halo`
        (None: whole passages only)."""
        if top_k is not None and top_k < 1:
            raise ValueError("top_k must be >= 1 or None")
        if window_words is not None and (window_words < 1 or window_stride < 1):
            raise ValueError("window_words and window_stride must be >= 1")
        self.embedder = embedder
        self.similarity = similarity
        self.query_similarity = query_similarity
        self.min_cluster = min_cluster
        self.halo_similarity = halo_similarity
        self.copies = copies
        self.top_k = top_k
        self.window_words = window_words
        self.window_stride = window_stride
        self.window_similarity = window_similarity
        self.window_halo = window_halo

    def rerank(self, question: Question, passages: list[Passage], trace: Trace) -> RerankResult:
        with trace.step("rerank", self.name, question=question.text,
                        passages=[p.id for p in passages]) as step:
            if len(passages) < 2:
                step.decision = "fewer than two passages: nothing to compare, left alone"
                step.checks.append(ConflictCheck(KIND, self.name, "no_conflict"))  # type: ignore[arg-type]
                return RerankResult(list(passages))
            removed: dict[int, str] = {}
            conflicts: list[Conflict] = []
            clusters, embedded = self._clusters(question, passages, step)
            for members in clusters:
                if len(members) == len(passages):
                    continue  # every passage agrees: nothing outside to compare with
                ids = ", ".join(passages[i].id for i in members)
                for i in members:
                    removed.setdefault(i, f"crafted cluster: {len(members)} passages ({ids}) "
                                          "written alike for the question")
                conflicts.append(Conflict(
                    KIND, self.name, [passages_side("", [passages[i] for i in members])],  # type: ignore[arg-type]
                    "removed", None, f"{len(members)} passages written alike for the question"))
            for group, edits in self._copy_groups(passages):
                backing = self._backing(passages, group, edits)
                backed = [i for i in group if backing[i]]
                ids = ", ".join(passages[i].id for i in group)
                if len(backed) == len(group):
                    action = "kept"  # every version stands elsewhere too
                else:
                    action = "removed"
                    for i in group:
                        removed.setdefault(i, f"altered copy: passages {ids} are one text with "
                                              "a stretch replaced")
                    for j in sorted({j for i in backed for j in backing[i]}):
                        removed.setdefault(j, f"backs one version of the altered copies {ids}; "
                                              "a backing passage can be injected too")
                versions = {i: ", ".join(edits[i]) for i in group}
                conflicts.append(Conflict(KIND, self.name, [  # type: ignore[arg-type]
                    ConflictSide(versions[i], excerpt(passages[i].text, versions[i]),
                                 [passages[i].id], passages[i].source) for i in group],
                    action, None, "one text in several versions: "
                    + "; ".join(f"{passages[i].id}: {versions[i]}" for i in group if versions[i])
                    + (f"; versions backed by other passages: "
                       f"{', '.join(passages[i].id for i in backed)}"
                       if backed else "; no other passage backs a version")))
            left = [p for i, p in enumerate(passages) if i not in removed]
            kept = left[:self.top_k]
            step.conflicts.extend(conflicts)
            status = "conflict" if conflicts else ("no_conflict" if embedded else "could_not_tell")
            step.checks.append(ConflictCheck(KIND, self.name, status))  # type: ignore[arg-type]
            step.outputs = {"kept": [p.id for p in kept],
                            "removed": {passages[i].id: why for i, why in sorted(removed.items())},
                            "below_top_k": [p.id for p in left[len(kept):]]}
            step.decision = (f"removed {len(removed)} of {len(passages)} passages"
                             if removed else "no sign of injection: all passages kept") + (
                f"; passed on the first {len(kept)} left" if len(kept) < len(left) else "")
            return RerankResult(kept, [RemovedPassage(passages[i], why)
                                       for i, why in sorted(removed.items())])

    def _clusters(self, question: Question, passages: Sequence[Passage],
                  step: Step) -> tuple[list[list[int]], bool]:
        if self.embedder is None or len(passages) <= self.min_cluster:
            return [], True  # a cluster removed leaves a passage outside: none can be here
        texts = [p.text for p in passages]
        pieces, owners = [], []
        if self.window_words is not None:
            for index, text in enumerate(texts):
                for window in windows(text, self.window_words, self.window_stride):
                    pieces.append(window)
                    owners.append(index)
        try:
            vectors = np.asarray(self.embedder.embed([question.text] + texts + pieces),
                                 dtype=np.float32)
        # any embedder failure is reported, never a silent pass
        except Exception as error:  # noqa: BLE001
            step.warnings.append(f"embedding failed ({type(error).__name__}: {error}); "
                                 "crafted clusters not looked for")
            return [], False
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        copies = self.copies or DEFAULT_COPIES
        clusters = crafted_clusters(vectors[0], vectors[1:len(texts) + 1], texts,
                                    similarity=self.similarity,
                                    query_similarity=self.query_similarity,
                                    min_size=self.min_cluster,
                                    halo_similarity=self.halo_similarity, copies=copies)
        if pieces:
            clusters = merged_groups(clusters + windowed_clusters(
                vectors[0], vectors[len(texts) + 1:], owners, texts,
                similarity=self.window_similarity, query_similarity=self.query_similarity,
                min_size=self.min_cluster, halo_similarity=self.window_halo, copies=copies))
        return clusters, True

    def _copy_groups(self, passages: Sequence[Passage]
                     ) -> list[tuple[list[int], dict[int, list[str]]]]:
        """Connected groups of altered copies, each with every member's replaced stretches."""
        if self.copies is None:
            return []
        pairs = altered_copies([p.text for p in passages], [p.title for p in passages],
                               self.copies)
        edits: dict[int, list[str]] = {}
        for pair in pairs:
            for side, index in ((0, pair.first), (1, pair.second)):
                edits.setdefault(index, []).extend(e[side] for e in pair.edits)
        groups = connected_groups(sorted(edits), [(p.first, p.second) for p in pairs])
        return [(members, {i: list(dict.fromkeys(edits[i])) for i in members})
                for members in groups]

    @staticmethod
    def _backing(passages: Sequence[Passage], group: list[int],
                 edits: dict[int, list[str]]) -> dict[int, list[int]]:
        """For each member of a copy group, the passages outside the group that hold every one
        of its replaced stretches (whole words)."""
        outside = {j: " " + " ".join(words(p.text)) + " "
                   for j, p in enumerate(passages) if j not in group}
        return {i: [j for j, text in outside.items()
                    if edits[i] and all(f" {stretch} " in text for stretch in edits[i])]
                for i in group}


@section("poison_filter")
class PoisonFilterConfig(Section):
    """The KB-free poisoning filter (pipeline.rerank = "poison_filter",
    faithrag/methods/poison_filter.py): crafted clusters are found in the retrieval embedder's
    space, altered copies by aligning the passages' words."""

    crafted_clusters: bool = True
    """remove groups of passages written alike for the question"""
    cluster_similarity: float = Field(0.8, ge=-1.0, le=1.0)
    """two passages are alike at this embedding cosine or above"""
    query_similarity: float = Field(0.55, ge=-1.0, le=1.0)
    """a crafted cluster's members are at least this close to the question on average"""
    min_cluster: int = Field(3, ge=2)
    """passages a crafted cluster holds at least (before the halo joins)"""
    halo_similarity: float = Field(0.6, ge=-1.0, le=1.0)
    """a passage this close to a crafted cluster's members on average joins it"""
    altered_copies: bool = True
    """remove passages that are one text with a stretch replaced"""
    copy_coverage: float = Field(DEFAULT_COPIES.copy_coverage, gt=0.0, le=1.0)
    """two passages are copies when their aligned words cover this share of the shorter"""
    max_edit_words: int = Field(DEFAULT_COPIES.max_edit_words, ge=1)
    """a replaced stretch is at most this many words on each side"""
    anchor_words: int = Field(DEFAULT_COPIES.anchor_words, ge=1)
    """a replaced stretch lies next to an unchanged run of at least this many words"""
    max_edits: int = Field(DEFAULT_COPIES.max_edits, ge=1)
    """copies differing in more places than this are different texts, unless rewritten"""
    rewrite_coverage: float = Field(DEFAULT_COPIES.rewrite_coverage, gt=0.0, le=1.0)
    """copies differing in many places are one text rewritten when their aligned words cover
    this share of the longer"""
    window_words: int | None = Field(None, ge=1)
    """also look for crafted clusters among overlapping windows of this many words (poison set
    inside longer real text); None: whole passages only. Embeds about one window per
    `window_stride` words of each passage"""
    window_stride: int = Field(8, ge=1)
    """words between the starts of two windows"""
    window_similarity: float = Field(0.75, ge=-1.0, le=1.0)
    """two windows of different passages are alike at this embedding cosine or above"""
    window_halo: float | None = Field(0.6, ge=-1.0, le=1.0)
    """a passage joins a cluster of windows when one of its windows is this close to the
    cluster's windows on average (None: no halo)"""
    top_k: int | None = Field(None, ge=1)
    """pass on only the first top_k passages left (None: all); set retrieval.k above it so the
    filter sees more passages than an attacker can place"""


@register("reranker", "poison_filter", section="poison_filter",
          reports_conflicts=(KIND,),
          description="removes passages that look injected (crafted clusters, altered copies); "
                      "no LLM call, no trusted source")
def build_poison_filter(llm: LLM, config: Config, retriever: Retriever | None) -> PoisonFilter:
    from faithrag.retrieval.embedder import get_embedder

    s = config.poison_filter
    embedder = get_embedder(config.retrieval.embedder, use_cache=config.use_cache,
                            threads=config.llm.n_threads) if s.crafted_clusters else None
    return PoisonFilter(embedder, similarity=s.cluster_similarity,
                        query_similarity=s.query_similarity, min_cluster=s.min_cluster,
                        halo_similarity=s.halo_similarity,
                        copies=CopySettings(s.copy_coverage, s.max_edit_words, s.anchor_words,
                                            s.max_edits, s.rewrite_coverage)
                        if s.altered_copies else None, top_k=s.top_k,
                        window_words=s.window_words, window_stride=s.window_stride,
                        window_similarity=s.window_similarity, window_halo=s.window_halo)

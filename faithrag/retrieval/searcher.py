"""Search an ordered list of passages by BM25, dense vectors, or both fused with reciprocal rank
fusion. Shared by the on-disk Index and the in-memory retriever."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faithrag.errors import ConfigError
from faithrag.retrieval.bm25 import BM25Index, BM25Params
from faithrag.retrieval.dense_index import DenseIndex
from faithrag.retrieval.embedder import Embedder, get_embedder
from faithrag.retrieval.fusion import reciprocal_rank_fusion
from faithrag.types import Passage

MODES = ("bm25", "dense", "hybrid")
_EMBED_BLOCK = 1024  # passages embedded per call when building (progress granularity)


def index_text(passage: Passage) -> str:
    """The text that is indexed: the title (if any) on its own line before the passage."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ConfigError(f"Unknown retrieval mode {mode!r}", f"Use one of {', '.join(MODES)}.")


class PassageSearcher:
    """`search` returns copies of the passages with `score` set: the BM25 score, the cosine
    similarity, or the fused RRF score (then `meta["ranks"]` holds each retriever's 1-based rank,
    or None). A hybrid search fuses the top `fusion_depth` (at least k) of each retriever."""

    def __init__(self, passages: list[Passage], mode: str, *, bm25: BM25Index | None = None,
                 dense: DenseIndex | None = None, embedder: Embedder | None = None,
                 bm25_params: BM25Params | None = None, rrf_k: int = 60, fusion_depth: int = 50):
        check_mode(mode)
        self.passages = passages
        self.mode = mode
        self.bm25 = bm25
        self.dense = dense
        self.embedder = embedder
        self.bm25_params = bm25_params or (bm25.params if bm25 else BM25Params())
        self.rrf_k = rrf_k
        self.fusion_depth = fusion_depth

    @property
    def uses_bm25(self) -> bool:
        return self.mode in ("bm25", "hybrid")

    @property
    def uses_dense(self) -> bool:
        return self.mode in ("dense", "hybrid")

    @classmethod
    def build(cls, passages: Sequence[Passage], mode: str = "bm25", *,
              embedder: Embedder | None = None, bm25_params: BM25Params | None = None,
              faiss_factory: str = "Flat", rrf_k: int = 60, fusion_depth: int = 50,
              progress: bool = False) -> PassageSearcher:
        check_mode(mode)
        if mode != "bm25" and embedder is None:
            embedder = get_embedder()
        searcher = cls([], mode, embedder=embedder, bm25_params=bm25_params, rrf_k=rrf_k,
                       fusion_depth=fusion_depth)
        if searcher.uses_dense:
            searcher.dense = DenseIndex(embedder.dim, faiss_factory)
        searcher.add(passages, progress=progress)
        return searcher

    def add(self, passages: Sequence[Passage], progress: bool = False) -> None:
        """Append passages. The BM25 part is rebuilt over all passages (its IDF statistics are
        global); the dense part only embeds the new ones."""
        passages = list(passages)
        if not passages:
            return
        if self.uses_dense:
            self.dense.add(self._embed([index_text(p) for p in passages], progress))
        self.passages.extend(passages)
        if self.uses_bm25:
            self.bm25 = BM25Index.build([index_text(p) for p in self.passages], self.bm25_params)

    def _embed(self, texts: list[str], progress: bool) -> np.ndarray:
        from tqdm import tqdm

        blocks = range(0, len(texts), _EMBED_BLOCK)
        vectors = [self.embedder.embed(texts[i:i + _EMBED_BLOCK])
                   for i in tqdm(blocks, desc="embedding", unit="block", disable=not progress)]
        return np.vstack(vectors)

    def search(self, query: str, k: int) -> list[Passage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        if k < 1 or not self.passages:
            return [[] for _ in queries]
        depth = k if self.mode != "hybrid" else max(k, self.fusion_depth)
        lexical = self.bm25.search_many(queries, depth) if self.uses_bm25 else None
        semantic = (self.dense.search(self.embedder.embed(list(queries)), depth)
                    if self.uses_dense else None)
        if self.mode == "bm25":
            return [self._hits(hits) for hits in lexical]
        if self.mode == "dense":
            return [self._hits(hits) for hits in semantic]
        return [self._fuse(lex, sem, k) for lex, sem in zip(lexical, semantic)]

    def _hits(self, hits: list[tuple[int, float]]) -> list[Passage]:
        return [self.passages[i].with_score(score) for i, score in hits]

    def _fuse(self, lexical: list[tuple[int, float]], semantic: list[tuple[int, float]],
              k: int) -> list[Passage]:
        lex_rank = {i: r for r, (i, _) in enumerate(lexical, start=1)}
        sem_rank = {i: r for r, (i, _) in enumerate(semantic, start=1)}
        fused = reciprocal_rank_fusion([[i for i, _ in lexical], [i for i, _ in semantic]],
                                       k=self.rrf_k)
        out = []
        for i, score in fused[:k]:
            passage = self.passages[i].with_score(score)
            passage.meta["ranks"] = {"bm25": lex_rank.get(i), "dense": sem_rank.get(i)}
            out.append(passage)
        return out

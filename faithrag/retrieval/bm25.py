"""BM25 over a list of texts, built and stored with bm25s.

bm25s precomputes every (term, document) score into a sparse CSC matrix at index time; we use its
`index`, `save` and `load`. Queries are scored here from that same matrix with `np.bincount`
instead of bm25s' numpy `retrieve` (which accumulates with `np.add.at`): the scores are identical
(tests compare them) and single-threaded queries run several times faster, without numba
(BENCHMARKS.md, section "BM25 over 100k passages, one core").

Tokenization: lower-cased regex words of two or more characters (bm25s' default pattern), English
stopwords removed, optional Snowball stemming (`stemmer="english"` needs PyStemmer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from faithrag.errors import ConfigError, RuntimeUnavailableError

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_PARAMS_FILE = "faithrag_bm25.json"
# bm25s cannot index a corpus without a single term; such a corpus gets this one placeholder
# term, which no query can produce (the tokenizer only yields word characters).
_NO_TERMS = "\x00"


@dataclass(frozen=True)
class BM25Params:
    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"  # bm25s scoring variant: robertson | lucene | atire | bm25l | bm25+
    stopwords: str | None = "en"
    stemmer: str | None = None  # a Snowball language such as "english" (needs PyStemmer)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class BM25Tokenizer:
    def __init__(self, params: BM25Params):
        from bm25s.stopwords import STOPWORDS_EN

        if params.stopwords not in (None, "en"):
            raise ConfigError(f"Unknown BM25 stopword list {params.stopwords!r}",
                              'Use "en" or None.')
        self._stopwords = frozenset(STOPWORDS_EN) if params.stopwords else frozenset()
        self._stem = _load_stemmer(params.stemmer) if params.stemmer else None

    def __call__(self, text: str) -> list[str]:
        words = [w for w in _TOKEN.findall(text.lower()) if w not in self._stopwords]
        return [self._stem(w) for w in words] if self._stem else words


def _load_stemmer(language: str) -> Callable[[str], str]:
    try:
        import Stemmer
    except ImportError as exc:
        raise RuntimeUnavailableError("BM25 stemming needs PyStemmer, which is not installed.",
                                      "pip install PyStemmer, or set stemmer=None.") from exc
    try:
        return Stemmer.Stemmer(language).stemWord
    except KeyError as exc:
        raise ConfigError(f"Unknown stemmer language {language!r}",
                          f"Choose one of {Stemmer.algorithms()}.") from exc


class BM25Index:
    """Sparse lexical index; document numbers are positions in the list given to `build`."""

    def __init__(self, model, params: BM25Params):
        self._model = model
        self.params = params
        self._tokenize = BM25Tokenizer(params)
        self._vocab: dict[str, int] = model.vocab_dict
        scores = model.scores
        self._data = scores["data"]
        self._indices = scores["indices"]
        self._indptr = scores["indptr"]
        self._num_docs = int(scores["num_docs"])
        self._nonoccurrence = model.nonoccurrence_array

    @classmethod
    def build(cls, texts: Sequence[str], params: BM25Params | None = None) -> BM25Index:
        import bm25s

        params = params or BM25Params()
        tokenize = BM25Tokenizer(params)
        model = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
        corpus = [tokenize(t) for t in texts]
        if corpus and not any(corpus):
            corpus[0] = [_NO_TERMS]
        model.index(corpus, show_progress=False)
        return cls(model, params)

    def __len__(self) -> int:
        return self._num_docs

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query` (zeros when no query term is indexed)."""
        ids = [self._vocab[t] for t in self._tokenize(query) if t in self._vocab]
        if not ids:
            return np.zeros(self._num_docs)
        spans = [(self._indptr[i], self._indptr[i + 1]) for i in ids]
        docs = np.concatenate([self._indices[a:b] for a, b in spans])
        weights = np.concatenate([self._data[a:b] for a, b in spans])
        scores = np.bincount(docs, weights=weights, minlength=self._num_docs)
        if self._nonoccurrence is not None:
            scores += self._nonoccurrence[ids].sum()
        return scores

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """Top-k (document number, score), best first, ties by document number; documents with
        score 0 (no query term) are left out."""
        scores = self.scores(query)
        candidates = np.flatnonzero(scores > 0)
        if candidates.size > k:
            kth = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
            candidates = candidates[scores[candidates] >= kth]
        order = np.lexsort((candidates, -scores[candidates]))[:k]
        return [(int(candidates[i]), float(scores[candidates[i]])) for i in order]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        return [self.search(q, k) for q in queries]

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        self._model.save(str(directory), show_progress=False)
        (directory / _PARAMS_FILE).write_text(json.dumps(self.params.as_dict()), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path, mmap: bool = False) -> BM25Index:
        import bm25s

        directory = Path(directory)
        params = BM25Params(**json.loads((directory / _PARAMS_FILE).read_text(encoding="utf-8")))
        model = bm25s.BM25.load(str(directory), mmap=mmap, load_vocab=True, show_progress=False)
        return cls(model, params)

"""A LanceDB table as the passage index, for corpora larger than memory (extra `[lancedb]`).

The on-disk `Index` holds every passage, its BM25 index and its vectors in memory; here they stay
in a LanceDB table (a local folder or an object-store URI such as s3://bucket/db) and only the
hits of a query are read. BM25 is LanceDB's native full-text index over the title and text, as
`Index` searches them (its own tokenizer: lower case, English stemming and stopwords, so its
scores differ from bm25s'); dense search is an exact cosine scan of the stored vectors, embedded
with the same embedders as `Index`; hybrid fuses the two rankings with the same reciprocal rank
fusion. The settings an index was built with live in the table's schema metadata, so opening
needs nothing but the URI. Adding documents again replaces or skips them as `Index.add` does.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from faithrag._version import __version__
from faithrag.errors import ConfigError, EmptyIndexError, MissingExtraError
from faithrag.retrieval.chunking import ChunkSettings
from faithrag.retrieval.embedder import Embedder, get_embedder
from faithrag.retrieval.fusion import reciprocal_rank_fusion
from faithrag.retrieval.index import (
    AddReport,
    IndexExistsError,
    check_unique_ids,
    passages_to_build,
    plan_update,
)
from faithrag.retrieval.searcher import index_text
from faithrag.types import Passage

FORMAT_VERSION = 2  # 2: full-text search over an `indexed` column (title + text)
TABLE = "passages"
_METADATA_KEY = b"faithrag"
_BATCH = 1024  # passages embedded and written per batch
_COLUMNS = ["id", "text", "title", "source", "meta"]
_INDEXED = "indexed"  # what BM25 searches: index_text (title + text), as in `Index`


class LanceStore:
    """`search` / `retrieve` return passages with `score` set: the BM25 score, the cosine
    similarity, or the fused RRF score (with `meta["ranks"]`, as `PassageSearcher`)."""

    def __init__(self, table: Any, manifest: dict[str, Any], embedder: Embedder | None,
                 fusion_depth: int = 50):
        self._table = table
        self.manifest = manifest
        self.mode: str = manifest["mode"]
        self._embedder = embedder
        self.fusion_depth = fusion_depth

    # ----- construction -----

    @classmethod
    def build(cls, passages: Sequence[Passage], uri: str, mode: str = "bm25", *,
              embedder: Embedder | str | None = None, table: str = TABLE,
              chunking: ChunkSettings | None = None, rrf_k: int = 60, use_cache: bool = True,
              overwrite: bool = False, progress: bool = False,
              root: str | Path | None = None) -> LanceStore:
        """Store `passages` in table `table` at `uri`; the settings, and `root` (the folder the
        documents' ids are relative to), are kept in the table's metadata."""
        passages = passages_to_build(passages, mode)
        lancedb, pa = _import_lancedb()
        db = lancedb.connect(uri)
        if not overwrite:
            cls.refuse_existing(uri, table=table)
        elif _open_table(db, table) is not None:
            db.drop_table(table)
        if mode != "bm25" and not hasattr(embedder, "embed"):
            embedder = get_embedder(embedder or "minilm", use_cache=use_cache)
        dense = mode != "bm25"
        manifest = {
            "format": FORMAT_VERSION, "faithrag_version": __version__, "mode": mode,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "chunking": chunking.as_dict() if chunking else None, "rrf_k": rrf_k,
            "dense": {"embedder": embedder.name, "identity": embedder.identity,
                      "dim": embedder.dim} if dense else None,
            "root": str(Path(root).resolve()) if root is not None else None,
        }
        fields = [pa.field(name, pa.string()) for name in [*_COLUMNS, _INDEXED]]
        if dense:
            fields.append(pa.field("vector", pa.list_(pa.float32(), embedder.dim)))
        schema = pa.schema(fields, metadata={_METADATA_KEY: json.dumps(manifest)})
        handle = db.create_table(table, schema=schema)
        store = cls(handle, manifest, embedder if dense else None)
        store._write(passages, progress)
        if store._uses_bm25:
            with warnings.catch_warnings():  # its replacement does not take FTS on a sync table
                warnings.simplefilter("ignore", DeprecationWarning)
                handle.create_fts_index(_INDEXED, use_tantivy=False, replace=True)
        return store

    @staticmethod
    def refuse_existing(uri: str, *, table: str = TABLE) -> None:
        """Raise IndexExistsError when the table exists (what `build` does unless told to
        overwrite), so that a caller can check before it loads any document."""
        lancedb, _ = _import_lancedb()
        if _open_table(lancedb.connect(uri), table) is not None:
            raise IndexExistsError(f"A table {table!r} already exists in {uri}.",
                                   "Pass overwrite=True to replace it, or extend it with "
                                   "LanceStore.open(uri).add(passages).")

    @classmethod
    def open(cls, uri: str, *, table: str = TABLE, embedder: Embedder | None = None,
             use_cache: bool = True) -> LanceStore:
        """Open a table built by `build`; the embedder is rebuilt from its settings unless
        given, and must be the one the vectors were made with."""
        lancedb, _ = _import_lancedb()
        db = lancedb.connect(uri)
        handle = _open_table(db, table)
        if handle is None:
            raise EmptyIndexError(f"No table {table!r} in the LanceDB database {uri}.",
                                  f"Build it with `faithrag index PATHS --out lancedb:{uri}`.")
        raw = (handle.schema.metadata or {}).get(_METADATA_KEY)
        if raw is None:
            raise EmptyIndexError(f"Table {table!r} in {uri} was not built by faithrag.",
                                  "Build it with `faithrag index PATHS --out lancedb:URI`.")
        manifest = json.loads(raw)
        if manifest.get("format") != FORMAT_VERSION:
            raise EmptyIndexError(f"{uri} has store format {manifest.get('format')!r}; this "
                                  f"faithrag reads format {FORMAT_VERSION}.",
                                  "Rebuild it with this version.")
        dense = manifest["dense"]
        if dense is not None:
            embedder = embedder or get_embedder(dense["embedder"], use_cache=use_cache)
            if embedder.identity != dense["identity"]:
                raise ConfigError(f"{uri} was embedded with {dense['identity']}, but the "
                                  f"embedder given is {embedder.identity}.",
                                  "Use the same embedder, or rebuild the store with the new one.")
        return cls(handle, manifest, embedder if dense is not None else None)

    # ----- use -----

    @property
    def _uses_bm25(self) -> bool:
        return self.mode in ("bm25", "hybrid")

    def __len__(self) -> int:
        return self._table.count_rows()

    @property
    def passages(self) -> Iterator[Passage]:
        """Every stored passage, streamed in batches (the corpus need not fit in memory)."""
        query = self._table.search().select(_COLUMNS)
        for batch in query.to_batches(_BATCH):
            yield from (_passage(row) for row in batch.to_pylist())

    @property
    def root(self) -> Path | None:
        """The folder the documents' ids are relative to; None for a store built without one."""
        root = self.manifest.get("root")
        return Path(root) if root else None

    def counts(self) -> dict[str, Any]:
        return {"passages": len(self)}

    def retrieve(self, query: str, k: int = 5) -> list[Passage]:
        """The Retriever protocol."""
        return self.search(query, k)

    def search_many(self, queries: Sequence[str], k: int = 5) -> list[list[Passage]]:
        return [self.search(query, k) for query in queries]

    def search(self, query: str, k: int = 5) -> list[Passage]:
        if k < 1:
            return []
        if self.mode == "bm25":
            return self._lexical(query, k)
        if self.mode == "dense":
            return self._semantic(query, k)
        depth = max(k, self.fusion_depth)
        lexical, semantic = self._lexical(query, depth), self._semantic(query, depth)
        by_id = {p.id: p for p in semantic + lexical}
        lex_rank = {p.id: r for r, p in enumerate(lexical, start=1)}
        sem_rank = {p.id: r for r, p in enumerate(semantic, start=1)}
        fused = reciprocal_rank_fusion([[p.id for p in lexical], [p.id for p in semantic]],
                                       k=self.manifest["rrf_k"])
        out = []
        for pid, score in fused[:k]:
            passage = by_id[pid].with_score(score)
            passage.meta["ranks"] = {"bm25": lex_rank.get(pid), "dense": sem_rank.get(pid)}
            out.append(passage)
        return out

    def add(self, passages: Sequence[Passage], progress: bool = False) -> AddReport:
        """Add passages document by document, as `Index.add` does (the stored passages are
        streamed once to find the incoming documents' old passages). The full-text index takes
        new rows in at once (LanceDB searches rows it has not indexed yet) and `optimize` folds
        them in."""
        passages = list(passages)
        if not passages:
            return AddReport(0, 0, 0)
        update = plan_update(passages, self.passages)
        stale = {p.id for p in update.stale}
        check_unique_ids(update.new, self._existing_ids([p.id for p in update.new]) - stale)
        if update.new:
            for chunk in _batches(sorted(stale)):
                self._table.delete(f"id IN ({_sql_strings(chunk)})")
            self._write(update.new, progress)
            self._table.optimize()
        return update.report()

    # ----- internals -----

    def _lexical(self, query: str, depth: int) -> list[Passage]:
        if not query.strip():
            return []
        from lancedb.query import MatchQuery  # words only: no phrase or operator syntax

        rows = (self._table.search(MatchQuery(query, _INDEXED), query_type="fts")
                .select(_COLUMNS + ["_score"]).limit(depth).to_list())
        return [_passage(row).with_score(float(row["_score"])) for row in rows]

    def _semantic(self, query: str, depth: int) -> list[Passage]:
        vector = self._embedder.embed([query])[0]
        rows = (self._table.search(vector, query_type="vector", vector_column_name="vector")
                .distance_type("cosine").select(_COLUMNS + ["_distance"]).limit(depth)
                .to_list())
        return [_passage(row).with_score(1.0 - float(row["_distance"])) for row in rows]

    def _write(self, passages: list[Passage], progress: bool) -> None:
        from tqdm import tqdm

        for start in tqdm(range(0, len(passages), _BATCH), desc="storing", unit="batch",
                          disable=not progress):
            batch = passages[start:start + _BATCH]
            rows = [{"id": p.id, "text": p.text, "title": p.title, "source": p.source,
                     "meta": json.dumps(p.meta, ensure_ascii=False), _INDEXED: index_text(p)}
                    for p in batch]
            if self._embedder is not None:
                vectors = self._embedder.embed([row[_INDEXED] for row in rows])
                for row, vector in zip(rows, np.asarray(vectors, dtype=np.float32)):
                    row["vector"] = vector.tolist()
            self._table.add(rows)

    def _existing_ids(self, ids: list[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _batches(ids):
            rows = (self._table.search().where(f"id IN ({_sql_strings(chunk)})").select(["id"])
                    .limit(len(chunk)).to_list())
            found.update(row["id"] for row in rows)
        return found


def _batches(ids: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), _BATCH):
        yield ids[start:start + _BATCH]


def _sql_strings(values: list[str]) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


def _passage(row: dict[str, Any]) -> Passage:
    return Passage(row["id"], row["text"], row["title"] or "", row["source"] or "", None,
                   json.loads(row["meta"]) if row["meta"] else {})


def _open_table(db: Any, name: str) -> Any | None:
    try:
        return db.open_table(name)
    except ValueError:  # LanceDB's "Table '…' was not found"
        return None


def _import_lancedb() -> tuple[Any, Any]:
    try:
        import lancedb
        import pyarrow
    except ImportError as exc:
        raise MissingExtraError("The LanceDB store", "lancedb",
                                f"Importing it failed: {exc}.") from exc
    return lancedb, pyarrow

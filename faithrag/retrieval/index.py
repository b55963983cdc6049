"""The on-disk index: passages plus a BM25 and/or dense part, and a manifest.

Directory layout:
    manifest.json     mode, embedder, chunking and BM25 parameters, counts, timestamps, version
    passages.jsonl    one passage per line, in index order
    bm25/             the bm25s index (modes bm25, hybrid)
    dense.faiss       the FAISS index (modes dense, hybrid)

Every file is written to a temporary name and moved into place; the manifest is written last, so
an interrupted build or add leaves either the old index or counts that do not match, which `load`
reports instead of serving a half-written index.

Adding documents again is safe: passages are grouped by the file they came from (`meta["file"]`,
else their document, else their own id); a group already indexed exactly as it is is skipped,
a changed one replaces the indexed passages of that file, and a new one is appended. The
manifest keeps the `root` the documents' ids are relative to, so that a file added later gets
the id it got at build time however its path is spelled (indexes built without one still load).
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from faithrag._version import __version__
from faithrag.errors import ConfigError, DataError, EmptyIndexError
from faithrag.retrieval.bm25 import BM25Index, BM25Params
from faithrag.retrieval.chunking import ChunkSettings
from faithrag.retrieval.dense_index import DenseIndex
from faithrag.retrieval.embedder import Embedder, get_embedder
from faithrag.retrieval.searcher import PassageSearcher, check_mode
from faithrag.types import Passage

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PASSAGES = "passages.jsonl"
BM25_DIR = "bm25"
DENSE_FILE = "dense.faiss"

_BUILD_HINT = "Build it with `faithrag index PATHS --out DIR` (or Index.build)."
MANIFEST_KEYS = frozenset({"format", "mode", "counts", "bm25", "dense", "rrf_k"})
# what reading a damaged part raises: a missing or unreadable file, bad JSON, text that is not
# UTF-8, a truncated .npy, a FAISS file it cannot parse
CORRUPT_PART_ERRORS = (OSError, ValueError, EOFError, KeyError, RuntimeError)
T = TypeVar("T")


def _rebuild_hint(directory: Path) -> str:
    return (f"Rebuild it: `faithrag index PATHS --out {directory} --overwrite` (or "
            f"Index.build(passages, {str(directory)!r}, overwrite=True)).")


def _read_part(path: Path, hint: str, read: Callable[[Path], T]) -> T:
    """`read(path)`, a damaged or missing part being an EmptyIndexError with `hint`."""
    try:
        return read(path)
    except EmptyIndexError:
        raise
    except CORRUPT_PART_ERRORS as exc:
        raise EmptyIndexError(f"{path} is missing or damaged ({type(exc).__name__}: {exc}).",
                              hint) from exc


class IndexExistsError(ConfigError):
    """An index is already where a new one was to be built. The hint names the Python
    arguments; the command line words it with its own flags."""


@dataclass(frozen=True)
class AddReport:
    """What `add` did, in passages."""

    added: int  # written: of new documents and of changed ones
    removed: int  # taken out: the old passages of changed documents
    unchanged: int  # skipped: their document was indexed exactly as it is


@dataclass
class IndexUpdate:
    """What adding passages to an index must do (see `plan_update`)."""

    new: list[Passage]  # to write
    stale: list[Passage]  # indexed passages of changed documents, to take out
    unchanged: int

    def report(self) -> AddReport:
        return AddReport(len(self.new), len(self.stale), self.unchanged)


def document_key(passage: Passage) -> str:
    """What a passage belongs to when documents are added again: its file, else its document,
    else itself."""
    return str(passage.meta.get("file") or passage.meta.get("doc_id") or passage.id)


def plan_update(incoming: Sequence[Passage], indexed: Iterable[Passage]) -> IndexUpdate:
    """Sort `incoming` passages into new, replacing (with the `indexed` passages they replace)
    and unchanged, document by document (see the module docstring). `indexed` may be a stream:
    only the passages of incoming documents are kept."""
    groups: dict[str, list[Passage]] = {}
    for passage in incoming:
        groups.setdefault(document_key(passage), []).append(passage)
    present: dict[str, list[Passage]] = {}
    for passage in indexed:
        key = document_key(passage)
        if key in groups:
            present.setdefault(key, []).append(passage)
    update = IndexUpdate([], [], 0)
    for key, group in groups.items():
        old = present.get(key)
        if old is not None and [_content(p) for p in old] == [_content(p) for p in group]:
            update.unchanged += len(group)
            continue
        update.stale += old or []
        update.new += group
    return update


def _content(passage: Passage) -> tuple[str, str, str, str]:
    return passage.id, passage.text, passage.title, passage.source


class Index:
    """A persistent passage index. `search` / `retrieve` return passages with `score` set."""

    def __init__(self, directory: Path, searcher: PassageSearcher, manifest: dict[str, Any]):
        self.directory = directory
        self._searcher = searcher
        self.manifest = manifest

    # ----- construction -----

    @classmethod
    def build(cls, passages: Sequence[Passage], out_dir: str | Path, mode: str = "bm25", *,
              embedder: Embedder | str | None = None, chunking: ChunkSettings | None = None,
              bm25_params: BM25Params | None = None, faiss_factory: str = "Flat",
              rrf_k: int = 60, use_cache: bool = True, overwrite: bool = False,
              progress: bool = False, root: str | Path | None = None) -> Index:
        """Index `passages` into `out_dir`. `embedder` (modes dense, hybrid) is an Embedder or a
        name for get_embedder (default "minilm"); `chunking` is recorded in the manifest, and so
        is `root`, the folder the documents' ids are relative to (see `load_documents`)."""
        passages = passages_to_build(passages, mode)
        directory = Path(out_dir)
        if not overwrite:
            cls.refuse_existing(directory)
        if mode != "bm25" and not hasattr(embedder, "embed"):
            embedder = get_embedder(embedder or "minilm", use_cache=use_cache)
        searcher = PassageSearcher.build(passages, mode, embedder=embedder,
                                         bm25_params=bm25_params, faiss_factory=faiss_factory,
                                         rrf_k=rrf_k, progress=progress)
        now = _now()
        manifest = {
            "format": FORMAT_VERSION,
            "faithrag_version": __version__,
            "mode": mode,
            "created": now,
            "updated": now,
            "counts": {},
            "chunking": chunking.as_dict() if chunking else None,
            "bm25": searcher.bm25_params.as_dict() if searcher.uses_bm25 else None,
            "dense": ({"embedder": searcher.embedder.name,
                       "identity": searcher.embedder.identity,
                       "dim": searcher.embedder.dim,
                       "faiss_factory": faiss_factory} if searcher.uses_dense else None),
            "rrf_k": rrf_k,
            "root": str(Path(root).resolve()) if root is not None else None,
        }
        directory.mkdir(parents=True, exist_ok=True)
        (directory / MANIFEST).unlink(missing_ok=True)  # invalid until the new one is written
        shutil.rmtree(directory / BM25_DIR, ignore_errors=True)  # parts of a replaced index
        (directory / DENSE_FILE).unlink(missing_ok=True)
        index = cls(directory, searcher, manifest)
        _write_passages(directory / PASSAGES, passages, append=False)
        index._save_parts_and_manifest()
        return index

    @staticmethod
    def refuse_existing(directory: str | Path) -> None:
        """Raise IndexExistsError when `directory` holds an index (what `build` does unless told
        to overwrite), so that a caller can check before it loads any document."""
        if (Path(directory) / MANIFEST).exists():
            raise IndexExistsError(f"An index already exists at {directory}",
                                   "Pass overwrite=True to replace it, or extend it with "
                                   "Index.load(directory).add(passages).")

    @classmethod
    def load(cls, directory: str | Path, *, embedder: Embedder | None = None,
             use_cache: bool = True) -> Index:
        """Open an index directory. The embedder is rebuilt from the manifest unless given; it
        must be the same model the index was built with."""
        directory = Path(directory)
        if not directory.is_dir():
            raise EmptyIndexError(f"No index at {directory}: the folder does not exist.",
                                  _BUILD_HINT)
        manifest_path = directory / MANIFEST
        if not manifest_path.is_file():
            raise EmptyIndexError(
                f"{directory} is not a faithrag index: {MANIFEST} is missing.",
                f"{_BUILD_HINT} An interrupted build leaves no manifest: build again.")
        rebuild = _rebuild_hint(directory)
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError as exc:  # not JSON, or not UTF-8
            raise EmptyIndexError(f"{manifest_path} is not valid JSON ({exc}).", rebuild) from exc
        if not isinstance(manifest, dict) or not MANIFEST_KEYS <= manifest.keys():
            raise EmptyIndexError(f"{manifest_path} is incomplete: it needs the keys "
                                  f"{', '.join(sorted(MANIFEST_KEYS))}.", rebuild)
        if manifest.get("format") != FORMAT_VERSION:
            raise EmptyIndexError(
                f"{directory} has index format {manifest.get('format')!r}; this faithrag "
                f"({__version__}) reads format {FORMAT_VERSION}.",
                f"Rebuild the index with this version. {_BUILD_HINT}")
        mode = manifest["mode"]
        check_mode(mode)
        passages = _read_part(directory / PASSAGES, rebuild, _read_passages)
        bm25 = dense = None
        if manifest["bm25"] is not None:
            bm25 = _read_part(directory / BM25_DIR, rebuild, BM25Index.load)
        if manifest["dense"] is not None:
            dense_info = manifest["dense"]
            embedder = embedder or get_embedder(dense_info["embedder"], use_cache=use_cache)
            if embedder.identity != dense_info["identity"]:
                raise ConfigError(
                    f"{directory} was embedded with {dense_info['identity']}, "
                    f"but the embedder given is {embedder.identity}.",
                    "Use the same embedder, or rebuild the index with the new one.")
            dense = _read_part(directory / DENSE_FILE, rebuild,
                               lambda path: DenseIndex.load(path, dense_info["faiss_factory"]))
        expected = manifest["counts"].get("passages") if isinstance(manifest["counts"],
                                                                     dict) else None
        sizes = {"passages.jsonl": len(passages), "manifest": expected}
        if bm25 is not None:
            sizes["bm25"] = len(bm25)
        if dense is not None:
            sizes["dense"] = len(dense)
        if len(set(sizes.values())) != 1:
            raise EmptyIndexError(f"{directory} is inconsistent (passage counts: {sizes}); "
                                  "an update was probably interrupted.", rebuild)
        searcher = PassageSearcher(passages, mode, bm25=bm25, dense=dense, embedder=embedder,
                                   rrf_k=manifest["rrf_k"])
        return cls(directory, searcher, manifest)

    # ----- use -----

    @property
    def mode(self) -> str:
        return self._searcher.mode

    def __len__(self) -> int:
        return len(self._searcher.passages)

    @property
    def passages(self) -> list[Passage]:
        """Every indexed passage, in index order (read-only use)."""
        return self._searcher.passages

    @property
    def root(self) -> Path | None:
        """The folder the documents' ids are relative to; None for an index built without one."""
        root = self.manifest.get("root")
        return Path(root) if root else None

    def counts(self) -> dict[str, Any]:
        """Passages, documents and passages per source, as of the last save."""
        return self.manifest["counts"]

    def search(self, query: str, k: int = 5) -> list[Passage]:
        return self._searcher.search(query, k)

    def search_many(self, queries: Sequence[str], k: int = 5) -> list[list[Passage]]:
        return self._searcher.search_many(queries, k)

    def retrieve(self, query: str, k: int = 5) -> list[Passage]:
        """The Retriever protocol."""
        return self.search(query, k)

    def add(self, passages: Sequence[Passage], progress: bool = False) -> AddReport:
        """Add passages document by document (new, replacing a changed one, or skipped when
        unchanged; see the module docstring) and persist. A new passage may not take the id of
        a passage of another document. Replacing rebuilds the search parts over every passage
        (the embedding cache spares re-embedding the kept ones)."""
        update = plan_update(list(passages), self._searcher.passages)
        stale = {id(p) for p in update.stale}
        kept = [p for p in self._searcher.passages if id(p) not in stale]
        check_unique_ids(update.new, {p.id for p in kept})
        if not update.new:
            return update.report()
        if update.stale:
            old = self._searcher
            self._searcher = PassageSearcher.build(
                kept + update.new, old.mode, embedder=old.embedder, bm25_params=old.bm25_params,
                faiss_factory=(self.manifest["dense"] or {}).get("faiss_factory", "Flat"),
                rrf_k=old.rrf_k, fusion_depth=old.fusion_depth, progress=progress)
            _write_passages(self.directory / PASSAGES, self._searcher.passages, append=False)
        else:
            self._searcher.add(update.new, progress=progress)
            _write_passages(self.directory / PASSAGES, update.new, append=True)
        self.manifest["updated"] = _now()
        self._save_parts_and_manifest()
        return update.report()

    # ----- persistence -----

    def _save_parts_and_manifest(self) -> None:
        searcher = self._searcher
        if searcher.uses_bm25:
            tmp = self.directory / f"{BM25_DIR}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            searcher.bm25.save(tmp)
            shutil.rmtree(self.directory / BM25_DIR, ignore_errors=True)
            os.replace(tmp, self.directory / BM25_DIR)
        if searcher.uses_dense:
            tmp = self.directory / f"{DENSE_FILE}.tmp"
            searcher.dense.save(tmp)
            os.replace(tmp, self.directory / DENSE_FILE)
        passages = searcher.passages
        self.manifest["counts"] = {
            "passages": len(passages),
            "documents": len({p.meta.get("doc_id", p.id) for p in passages}),
            "sources": dict(sorted(Counter(p.source for p in passages).items())),
        }
        _write_atomic(self.directory / MANIFEST, json.dumps(self.manifest, indent=2) + "\n")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def passages_to_build(passages: Sequence[Passage], mode: str) -> list[Passage]:
    """The passages of a new index, checked: a known mode, at least one, unique ids."""
    check_mode(mode)
    passages = list(passages)
    if not passages:
        raise EmptyIndexError("No passages to index.",
                              "Check the input paths, and that the files are .txt, .md or "
                              ".jsonl with non-empty text.")
    check_unique_ids(passages, set())
    return passages


def check_unique_ids(passages: list[Passage], existing: set[str]) -> None:
    seen = set(existing)
    for passage in passages:
        if passage.id in seen:
            raise DataError(f"Duplicate passage id {passage.id!r}",
                            "Passage ids must be unique in an index: give the documents "
                            "distinct ids.")
        seen.add(passage.id)


def _passage_record(passage: Passage) -> dict[str, Any]:
    return {"id": passage.id, "text": passage.text, "title": passage.title,
            "source": passage.source, "meta": passage.meta}


def _write_passages(path: Path, passages: list[Passage], append: bool) -> None:
    lines = "".join(json.dumps(_passage_record(p), ensure_ascii=False) + "\n" for p in passages)
    if append:
        with path.open("a", encoding="utf-8") as f:
            f.write(lines)
    else:
        _write_atomic(path, lines)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _read_passages(path: Path) -> list[Passage]:
    """The passages of `path`; OSError or ValueError when it is missing or not UTF-8, and
    EmptyIndexError for a line that is not a passage."""
    passages = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            try:
                row = json.loads(line)
                passages.append(Passage(row["id"], row["text"], row.get("title", ""),
                                        row.get("source", ""), None, row.get("meta", {})))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise EmptyIndexError(f"{path}:{line_no} is corrupt ({exc}).",
                                      _rebuild_hint(path.parent)) from exc
    return passages

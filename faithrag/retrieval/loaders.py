"""Load documents from .txt, .md and .jsonl files or from folders of them.

A file's id is its path relative to a root folder, whatever way the path was spelled
(`more`, `./more/`, `more/n.txt` and an absolute path name the same file the same way); a file
outside the root is named by its absolute path. The root is given (an index keeps the one it was
built with, so that adding a file again finds it), or else it is the folder that holds every
given path: a folder `more` gives ids `more/...`, a file `more/n.txt` alone gives `n.txt`. A
file reached twice (given twice, or also inside a given folder) is read once.

A .txt or .md document's id is its file's id; a jsonl line uses its "id" field, else
`<file id>:<line number>`. Every document's `meta` holds `file` (its file's id, which an index
uses to replace a changed file's passages) and `path` (the path as it was reached). `source` is the
configured source name, else the file's id, so trust can be configured per source later.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faithrag.errors import DataError

SUPPORTED_SUFFIXES = (".txt", ".md", ".jsonl")

log = logging.getLogger(__name__)


class MalformedDocumentError(DataError):
    """A jsonl line is not a document. The hint names the Python argument; the command line
    words it with its own flags."""


class _MalformedLine(Exception):
    """A jsonl line that is not a document; the message says why."""


@dataclass
class Document:
    id: str
    text: str
    title: str = ""
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadResult:
    documents: list[Document]
    skipped_lines: int = 0  # malformed jsonl lines skipped (only with skip_malformed=True)
    warnings: list[str] = field(default_factory=list)


def load_documents(
    paths: str | Path | Iterable[str | Path],
    *,
    source: str | None = None,
    skip_malformed: bool = False,
    root: str | Path | None = None,
) -> LoadResult:
    """Read every supported file under `paths` (folders are walked recursively, in sorted order,
    skipping hidden entries); ids are relative to `root` (default: `documents_root(paths)`). A
    malformed jsonl line raises DataError naming `file:line`; with `skip_malformed=True` it is
    skipped and counted instead.

    Example: `load_documents(["notes", "more/n.txt"], root=".")` gives ids `notes/a.txt`, ...,
    `more/n.txt`; so does `load_documents("more/n.txt", root=".")` for that file.
    """
    given = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    base = Path(root).resolve() if root is not None else documents_root(given)
    result = LoadResult(documents=[])
    read: set[Path] = set()
    for path, location in (found for p in given for found in _files(p)):
        if location not in read:
            read.add(location)
            _load_file(path, _id_under(base, location), source, skip_malformed, result)
    _check_unique_ids(result.documents)
    if result.skipped_lines:
        log.warning("skipped %d malformed jsonl line(s); first: %s",
                    result.skipped_lines, result.warnings[0])
    return result


def documents_root(paths: Iterable[str | Path]) -> Path:
    """The default root of `load_documents`: the deepest folder that holds every given path."""
    parents = [os.fspath(Path(p).resolve().parent) for p in paths]
    return Path(os.path.commonpath(parents)) if parents else Path.cwd()


def _id_under(root: Path, location: Path) -> str:
    """The id of the file at the absolute `location`: its path relative to `root`, or its
    absolute path when it lies outside `root`."""
    try:
        return location.relative_to(root).as_posix()
    except ValueError:
        return location.as_posix()


def _files(given: Path) -> list[tuple[Path, Path]]:
    """(path as reached, absolute location) of every supported file at `given`."""
    if not given.exists():
        raise DataError(f"Path not found: {given}", "Pass an existing file or folder.")
    if given.is_file():
        if given.suffix.lower() not in SUPPORTED_SUFFIXES:
            raise DataError(f"Unsupported file type: {given}",
                            f"Supported: {', '.join(SUPPORTED_SUFFIXES)}.")
        return [(given, given.resolve())]
    found = []
    folder = given.resolve()
    for path in sorted(given.rglob("*")):
        rel = path.relative_to(given)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_file() and path.suffix.lower() in SUPPORTED_SUFFIXES:
            found.append((path, folder / rel))
    return found


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                        "Convert the file to UTF-8.") from exc


def _load_file(path: Path, file_id: str, source: str | None, skip_malformed: bool,
               result: LoadResult) -> None:
    text = _read_text(path)
    suffix = path.suffix.lower()
    if suffix != ".jsonl":
        title = _markdown_title(text) if suffix == ".md" else ""
        result.documents.append(Document(file_id, text, title, source or file_id,
                                         {"path": str(path), "file": file_id}))
        return
    # lines end at "\n" only: str.splitlines would also split inside strings that hold U+2028,
    # U+2029 or U+0085, which JSON writers leave unescaped
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = _parse_jsonl_line(line)
        except _MalformedLine as exc:
            where = f"{path}:{line_no}"
            if not skip_malformed:
                raise MalformedDocumentError(
                    f"{where}: {exc}", "Fix the line, or skip malformed lines (they are "
                    "counted) with load_documents(..., skip_malformed=True).") from exc
            result.skipped_lines += 1
            result.warnings.append(f"{where}: {exc}")
            continue
        doc_id = str(row["id"]) if row.get("id") is not None else f"{file_id}:{line_no}"
        result.documents.append(Document(doc_id, row["text"], row.get("title") or "",
                                         source or file_id,
                                         {"path": str(path), "file": file_id, "line": line_no}))


def _parse_jsonl_line(line: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _MalformedLine(f"invalid JSON ({exc.msg})") from exc
    if not isinstance(row, dict):
        raise _MalformedLine(f"expected a JSON object, got {type(row).__name__}")
    if not isinstance(row.get("text"), str):
        raise _MalformedLine('missing or non-string "text" field')
    if row.get("title") is not None and not isinstance(row["title"], str):
        raise _MalformedLine('"title" must be a string')
    if isinstance(row.get("id"), (dict, list)):
        raise _MalformedLine('"id" must be a string or a number')
    return row


def _markdown_title(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
        if line.strip():
            return ""
    return ""


def _check_unique_ids(documents: list[Document]) -> None:
    seen: dict[str, Document] = {}
    for doc in documents:
        if doc.id in seen:
            first = seen[doc.id].meta.get("path")
            raise DataError(f"Duplicate document id {doc.id!r} ({first} and {doc.meta.get('path')})",
                            "Give every jsonl line a unique id, or load the two inputs "
                            "into separate indexes.")
        seen[doc.id] = doc

"""Load documents from .txt, .md and .jsonl files or from folders of them.

Document ids are stable: a file's path relative to the folder it was found in (prefixed with that
folder's name), or the file name when a file is given directly; a jsonl line uses its "id" field,
else `<file id>:<line number>`. `source` is the configured source name, else the file's id, so
trust can be configured per source later.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faithrag.errors import DataError

SUPPORTED_SUFFIXES = (".txt", ".md", ".jsonl")

log = logging.getLogger(__name__)


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
) -> LoadResult:
    """Read every supported file under `paths` (folders are walked recursively, in sorted order,
    skipping hidden entries). A malformed jsonl line raises DataError naming `file:line`; with
    `skip_malformed=True` it is skipped and counted instead."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    result = LoadResult(documents=[])
    for root in (Path(p) for p in paths):
        for path, file_id in _files(root):
            _load_file(path, file_id, source, skip_malformed, result)
    _check_unique_ids(result.documents)
    if result.skipped_lines:
        log.warning("skipped %d malformed jsonl line(s); first: %s",
                    result.skipped_lines, result.warnings[0])
    return result


def _files(root: Path) -> list[tuple[Path, str]]:
    if not root.exists():
        raise DataError(f"Path not found: {root}", "Pass an existing file or folder.")
    if root.is_file():
        if root.suffix.lower() not in SUPPORTED_SUFFIXES:
            raise DataError(f"Unsupported file type: {root}",
                            f"Supported: {', '.join(SUPPORTED_SUFFIXES)}.")
        return [(root, root.name)]
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_file() and path.suffix.lower() in SUPPORTED_SUFFIXES:
            found.append((path, f"{root.resolve().name}/{rel.as_posix()}"))
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
                                         {"path": str(path)}))
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
                raise DataError(f"{where}: {exc}",
                                "Fix the line, or load with skip_malformed=True "
                                "(--skip-malformed) to skip bad lines.") from exc
            result.skipped_lines += 1
            result.warnings.append(f"{where}: {exc}")
            continue
        doc_id = str(row["id"]) if row.get("id") is not None else f"{file_id}:{line_no}"
        result.documents.append(Document(doc_id, row["text"], row.get("title") or "",
                                         source or file_id,
                                         {"path": str(path), "line": line_no}))


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

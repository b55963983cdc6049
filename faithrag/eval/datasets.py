"""Dataset registry over the unified JSONL evaluation data.

Layout of a data root (default ``../shared/data`` relative to the working directory, overridden by
the ``root`` argument or the ``FAITHRAG_DATA_DIR`` environment variable)::

    <root>/<name>/<split>.jsonl        e.g. <root>/popqa/dev.jsonl

A file can also be loaded on its own with ``load_dataset(file=...)``.

Each line is one JSON object of one of two kinds; the kind of a file is decided by its first
object (``passages`` present -> ranking, otherwise QA) and every later line must be of that kind.

QA line -> :class:`QAItem`::

    id                 str, required, unique within the file
    source             str, optional (defaults to the dataset name)
    question           str, required, non-empty
    context            null | str | list of documents, each
                         {text: str (required), title: str, is_supporting: bool,
                          stance: str, poisoned: bool, doc_type: str, doc_answer: str, ...}
                         (unknown document keys are kept in ContextDoc.meta)
    answer             str, required, non-empty; for conflict sets the answer the CONTEXT supports
    answers            [str], optional (defaults to [answer]); answers[0] must equal answer
    choices            [str] (>= 2), only for multiple-choice sets
    answer_idx         int, required with choices: 0 <= answer_idx < len(choices) and
                         choices[answer_idx] equals answer up to case, whitespace and trailing
                         ".!?" (TruthfulQA's MC1 option ends with "." where the answer does not);
                         answer must not match any other choice that way
    conflict_type      str, optional
    parametric_answer  str, optional: the memorised answer that the context contradicts
    meta               dict, optional

Ranking line -> :class:`RankItem`::

    id, source (as above), query (str, required), meta (dict, optional),
    passages: non-empty list of {pid: str (unique within the item), text: str,
              relevance: int >= 0, is_contrary: bool (default false), role: str (default ""), ...}
              (unknown passage keys are kept in RankPassage.meta)

Unknown top-level keys are errors (they usually mean a typo or a schema change). A malformed line
is never dropped silently: with ``on_error="skip"`` it is recorded in ``Dataset.errors`` as
``(file, line, message)`` and logged; with ``on_error="raise"`` it raises :class:`DataError`.
Blank lines are ignored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from faithrag.answers import canonical_answer
from faithrag.errors import DataError
from faithrag.types import Passage, Question

log = logging.getLogger(__name__)

DATA_DIR_ENV = "FAITHRAG_DATA_DIR"
DEFAULT_DATA_DIR = Path("..") / "shared" / "data"
DATA_DIR_HINT = f"pass --data-dir or set {DATA_DIR_ENV}"

_QA_KEYS = {"id", "source", "question", "context", "answer", "answers", "choices", "answer_idx",
            "conflict_type", "parametric_answer", "meta"}
_RANK_KEYS = {"id", "source", "query", "passages", "meta"}
_DOC_FIELDS = {"title": str, "text": str, "is_supporting": bool, "stance": str, "poisoned": bool,
               "doc_type": str, "doc_answer": str}
_RANK_PASSAGE_FIELDS = {"pid": str, "text": str, "relevance": int, "is_contrary": bool, "role": str}


@dataclass
class ContextDoc:
    text: str
    title: str = ""
    is_supporting: bool | None = None
    stance: str | None = None
    poisoned: bool | None = None
    doc_type: str | None = None
    doc_answer: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def labels(self) -> dict[str, Any]:
        """The evaluation labels that are set (is_supporting, stance, poisoned, doc_type,
        doc_answer) plus any extra keys."""
        named = {"is_supporting": self.is_supporting, "stance": self.stance,
                 "poisoned": self.poisoned, "doc_type": self.doc_type,
                 "doc_answer": self.doc_answer}
        return {**{k: v for k, v in named.items() if v is not None}, **self.meta}


@dataclass
class QAItem:
    id: str
    source: str
    question: str
    context: str | list[ContextDoc] | None
    answer: str
    answers: list[str]
    choices: list[str] | None = None
    answer_idx: int | None = None
    conflict_type: str | None = None
    parametric_answer: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def passages(self) -> list[Passage]:
        """The item's own context as passages: a string context is one passage, a document list
        gives one passage per document (title kept). Ids are ``<item id>#c<i>`` and the source is
        ``"context"``. ``meta`` carries the document's labels (is_supporting, stance, poisoned,
        doc_type, doc_answer): they are for scoring and display, and methods must not read them."""
        if self.context is None:
            return []
        if isinstance(self.context, str):
            return [Passage(id=f"{self.id}#c0", text=self.context, source="context")]
        return [Passage(id=f"{self.id}#c{i}", text=doc.text, title=doc.title, source="context",
                        meta=doc.labels())
                for i, doc in enumerate(self.context)]

    def as_question(self) -> Question:
        return Question(text=self.question, id=self.id,
                        choices=list(self.choices) if self.choices is not None else None)


@dataclass
class RankPassage:
    pid: str
    text: str
    relevance: int
    is_contrary: bool = False
    role: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class RankItem:
    id: str
    source: str
    query: str
    passages: list[RankPassage]
    meta: dict[str, Any] = field(default_factory=dict)

    def relevance(self) -> dict[str, int]:
        return {p.pid: p.relevance for p in self.passages}

    def contrary_pids(self) -> set[str]:
        return {p.pid for p in self.passages if p.is_contrary}

    def as_passages(self) -> list[Passage]:
        """Candidates in file order, id = pid, source ``"candidates"``; ``meta`` holds the labels
        (relevance, is_contrary, role, extras) for scoring and display only."""
        return [Passage(id=p.pid, text=p.text, source="candidates",
                        meta={"relevance": p.relevance, "is_contrary": p.is_contrary,
                              "role": p.role, **p.meta})
                for p in self.passages]


class MalformedItemError(DataError):
    """A dataset line is malformed and `on_error="raise"`. The hint names the Python argument;
    the command line words it with its own flags."""


class LineError(NamedTuple):
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass
class Dataset:
    name: str
    path: Path
    split: str
    kind: Literal["qa", "rank"]
    sha256: str  # of the file's bytes, for run manifests
    items: list[QAItem] | list[RankItem]
    errors: list[LineError] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[QAItem | RankItem]:
        return iter(self.items)

    def __getitem__(self, index: int) -> QAItem | RankItem:
        return self.items[index]

    def corpus(self) -> list[Passage]:
        """Every passage of the (qa) items' contexts, each text once: in the order texts first
        appear, as the passage of the text's last occurrence. What a retriever over the whole
        set searches."""
        return list({p.text: p for item in self.items for p in item.passages()}.values())


class TwoWayChoices(NamedTuple):
    choices: list[str]
    answer_idx: int


def resolve_data_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """The data root: ``root`` if given, else $FAITHRAG_DATA_DIR, else ``../shared/data``
    relative to the current working directory. Raises DataError if it is not a directory."""
    if root is not None:
        path, origin = Path(root), "given"
    elif os.environ.get(DATA_DIR_ENV):
        path, origin = Path(os.environ[DATA_DIR_ENV]), f"from ${DATA_DIR_ENV}"
    else:
        path, origin = Path.cwd() / DEFAULT_DATA_DIR, "default"
    if not path.is_dir():
        raise DataError(f"data directory {path} ({origin}) does not exist", hint=DATA_DIR_HINT)
    return path


def list_datasets(root: str | os.PathLike[str] | None = None, split: str = "dev") -> list[str]:
    """Names of the sub-directories of the data root that hold ``<split>.jsonl``, sorted."""
    data_dir = resolve_data_dir(root)
    return sorted(p.name for p in data_dir.iterdir() if (p / f"{split}.jsonl").is_file())


def load_dataset(name: str | None = None, root: str | os.PathLike[str] | None = None,
                 split: str = "dev", file: str | os.PathLike[str] | None = None,
                 on_error: Literal["skip", "raise"] = "skip") -> Dataset:
    """Load and validate ``<root>/<name>/<split>.jsonl``, or a single ``file``.

    Every line is validated (see the module docstring). ``on_error="skip"`` records malformed
    lines in ``Dataset.errors`` and logs a warning; ``"raise"`` raises DataError at the first one.
    A file without any valid item raises DataError either way.
    """
    if on_error not in ("skip", "raise"):
        raise ValueError(f"on_error must be 'skip' or 'raise', not {on_error!r}")
    if file is not None:
        path = Path(file)
        if not path.is_file():
            raise DataError(f"dataset file {path} does not exist",
                            hint="check the path given with --file")
        if name is None:
            name = path.parent.name if path.stem == split else path.stem
    else:
        if name is None:
            raise ValueError("give a dataset name or a file")
        data_dir = resolve_data_dir(root)
        path = data_dir / name / f"{split}.jsonl"
        if not path.is_file():
            available = list_datasets(data_dir, split)
            raise DataError(f"no dataset {name!r} with split {split!r} in {data_dir}",
                            hint=f"available: {', '.join(available) or 'none'}; {DATA_DIR_HINT}")
    raw = path.read_bytes()
    kind, items, errors = _parse_lines(raw, str(path), name, on_error)
    if errors:
        log.warning("%s: skipped %d malformed line(s); first: %s", path, len(errors), errors[0])
    if not items:
        detail = f"; first error: {errors[0]}" if errors else ""
        raise DataError(f"{path} holds no valid item{detail}",
                        hint="check that the file is in the unified JSONL format")
    return Dataset(name=name, path=path, split=split, kind=kind,
                   sha256=hashlib.sha256(raw).hexdigest(), items=items, errors=errors)


def golden_version(item: QAItem) -> QAItem | None:
    """The item's non-conflicting version (KRE's `meta.golden_context` and `golden_answer`): the
    context agrees with the model's memory, so a faithful method must not lose accuracy on it.
    None when the item has no golden version or its golden answer is not one of its options."""
    context, answer = item.meta.get("golden_context"), item.meta.get("golden_answer")
    if not context or not answer:
        return None
    answer_idx = None
    if item.choices is not None:
        if answer not in item.choices:
            return None
        answer_idx = item.choices.index(answer)
    return QAItem(item.id, item.source, item.question, context, answer, [answer], item.choices,
                  answer_idx, None, None, {"golden_version_of": item.id})


def two_way_choices(item: QAItem, seed: int = 0) -> TwoWayChoices | None:
    """A two-option multiple-choice version of a non-MC conflict item (the cofaithfulqa_* sets).

    Rule:
    1. The options are the context answer (``item.answer``) and ``item.parametric_answer``.
    2. None (no choice item) when the parametric answer is missing or empty after
       normalisation, or when it equals a gold alias in ``item.answers`` after the canonical
       normalisation of ``metrics.canonical_answer`` (SQuAD normalisation plus number words and
       dates, so "two" = "2" and "march 11 2011" = "11 March 2011"): both options would then
       be correct. On the dev files this drops 16 of the 4115 cofaithfulqa_* items.
    3. Both options are shown lower-cased, whitespace-collapsed and without a trailing ".": the
       source stores parametric answers lower-cased without punctuation, so the gold answer's
       casing would otherwise tell the options apart.
    4. Order: the context answer comes first iff the first byte of
       ``sha256(f"{seed}:{item.id}")`` is even; ``answer_idx`` is its position.
    Scoring uses ``answer_idx``; the option texts are for the prompt.
    """
    if item.choices is not None:
        raise ValueError(f"{item.id} is already multiple-choice")
    parametric = (item.parametric_answer or "").strip()
    canonical = canonical_answer(parametric)
    if not canonical or any(canonical == canonical_answer(alias) for alias in item.answers):
        return None
    options = [_display_option(item.answer), _display_option(parametric)]
    if hashlib.sha256(f"{seed}:{item.id}".encode()).digest()[0] % 2 == 0:
        return TwoWayChoices(options, 0)
    return TwoWayChoices(options[::-1], 1)


def _display_option(text: str) -> str:
    return " ".join(text.lower().split()).removesuffix(".").rstrip()


class _Invalid(Exception):
    """A line failed validation; the message says why."""


def _parse_lines(raw: bytes, file: str, name: str, on_error: str
                 ) -> tuple[Literal["qa", "rank"], list, list[LineError]]:
    kind: Literal["qa", "rank"] | None = None
    items: list = []
    errors: list[LineError] = []
    seen_ids: set[str] = set()
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise _Invalid(f"invalid JSON: {exc}") from None
            if not isinstance(obj, dict):
                raise _Invalid(f"expected a JSON object, got {type(obj).__name__}")
            if kind is None:
                kind = "rank" if "passages" in obj else "qa"
            item = _rank_item(obj, name) if kind == "rank" else _qa_item(obj, name)
            if item.id in seen_ids:
                raise _Invalid(f"duplicate id {item.id!r}")
            seen_ids.add(item.id)
            items.append(item)
        except _Invalid as exc:
            error = LineError(file, number, str(exc))
            if on_error == "raise":
                raise MalformedItemError(f"malformed dataset line {error}",
                                         hint="fix the line, or load with on_error='skip' to "
                                              "skip and count malformed lines") from None
            errors.append(error)
    return kind or "qa", items, errors


def _qa_item(obj: dict, name: str) -> QAItem:
    _check_keys(obj, _QA_KEYS, "QA")
    answer = _string(obj, "answer", required=True, nonempty=True)
    answers = _string_list(obj, "answers", required=False) or [answer]
    if answers[0] != answer:
        raise _Invalid(f"answers[0] {answers[0]!r} differs from answer {answer!r}")
    choices = _string_list(obj, "choices", required=False)
    answer_idx = obj.get("answer_idx")
    if choices is None:
        if answer_idx is not None:
            raise _Invalid("answer_idx given without choices")
    else:
        if len(choices) < 2:
            raise _Invalid(f"choices needs at least 2 options, got {len(choices)}")
        if not _is_int(answer_idx):
            raise _Invalid(f"answer_idx must be an int with choices, got {answer_idx!r}")
        if not 0 <= answer_idx < len(choices):
            raise _Invalid(f"answer_idx {answer_idx} out of range for {len(choices)} choices")
        matching = [i for i, c in enumerate(choices) if _same_option(c, answer)]
        if answer_idx not in matching:
            raise _Invalid(f"choices[{answer_idx}] = {choices[answer_idx]!r} is not the answer "
                           f"{answer!r}")
        if len(matching) > 1:
            raise _Invalid(f"answer {answer!r} matches several choices {matching}")
    return QAItem(
        id=_string(obj, "id", required=True, nonempty=True),
        source=_string(obj, "source", required=False) or name,
        question=_string(obj, "question", required=True, nonempty=True),
        context=_context(obj.get("context")),
        answer=answer,
        answers=answers,
        choices=choices,
        answer_idx=answer_idx,
        conflict_type=_string(obj, "conflict_type", required=False),
        parametric_answer=_string(obj, "parametric_answer", required=False),
        meta=_meta(obj),
    )


def _rank_item(obj: dict, name: str) -> RankItem:
    _check_keys(obj, _RANK_KEYS, "ranking")
    raw_passages = obj.get("passages")
    if not isinstance(raw_passages, list) or not raw_passages:
        raise _Invalid("passages must be a non-empty list")
    passages = []
    for i, raw in enumerate(raw_passages):
        where = f"passages[{i}]"
        if not isinstance(raw, dict):
            raise _Invalid(f"{where} must be an object")
        for key in ("pid", "text", "relevance"):
            if key not in raw:
                raise _Invalid(f"{where} lacks {key!r}")
        _check_field_types(raw, _RANK_PASSAGE_FIELDS, where)
        if raw["relevance"] < 0:
            raise _Invalid(f"{where}.relevance must be >= 0")
        passages.append(RankPassage(
            pid=raw["pid"], text=raw["text"], relevance=raw["relevance"],
            is_contrary=raw.get("is_contrary", False), role=raw.get("role", ""),
            meta={k: v for k, v in raw.items() if k not in _RANK_PASSAGE_FIELDS}))
    pids = [p.pid for p in passages]
    if len(set(pids)) != len(pids):
        raise _Invalid("duplicate pid in passages")
    return RankItem(
        id=_string(obj, "id", required=True, nonempty=True),
        source=_string(obj, "source", required=False) or name,
        query=_string(obj, "query", required=True, nonempty=True),
        passages=passages,
        meta=_meta(obj),
    )


def _context(value: Any) -> str | list[ContextDoc] | None:
    """The item's context; null means none, and an empty one is refused as a likely mistake."""
    if value is None:
        return value
    if isinstance(value, str):
        if not value.strip():
            raise _Invalid("context is empty (use null for an item without context)")
        return value
    if not isinstance(value, list):
        raise _Invalid(f"context must be null, a string or a list, got {type(value).__name__}")
    if not value:
        raise _Invalid("context is an empty list (use null for an item without context)")
    docs = []
    for i, raw in enumerate(value):
        where = f"context[{i}]"
        if not isinstance(raw, dict):
            raise _Invalid(f"{where} must be an object")
        if "text" not in raw:
            raise _Invalid(f"{where} lacks 'text'")
        _check_field_types(raw, _DOC_FIELDS, where)
        if not str(raw["text"]).strip():
            raise _Invalid(f"{where} has an empty 'text'")
        docs.append(ContextDoc(
            **{k: raw[k] for k in _DOC_FIELDS if k in raw},
            meta={k: v for k, v in raw.items() if k not in _DOC_FIELDS}))
    return docs


def _check_keys(obj: dict, allowed: set[str], kind: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise _Invalid(f"unknown key(s) for a {kind} item: {', '.join(unknown)}")


def _check_field_types(raw: dict, fields: dict[str, type], where: str) -> None:
    for key, expected in fields.items():
        if key not in raw:
            continue
        value = raw[key]
        ok = _is_int(value) if expected is int else isinstance(value, expected)
        if not ok:
            raise _Invalid(f"{where}.{key} must be {expected.__name__}, got {value!r:.60}")


def _string(obj: dict, key: str, *, required: bool, nonempty: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise _Invalid(f"missing required field {key!r}")
        return None
    if not isinstance(value, str):
        raise _Invalid(f"{key} must be a string, got {type(value).__name__}")
    if nonempty and not value.strip():
        raise _Invalid(f"{key} is empty")
    return value


def _string_list(obj: dict, key: str, *, required: bool) -> list[str] | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise _Invalid(f"missing required field {key!r}")
        return None
    if not isinstance(value, list) or not value:
        raise _Invalid(f"{key} must be a non-empty list of strings")
    for i, element in enumerate(value):
        if not isinstance(element, str) or not element.strip():
            raise _Invalid(f"{key}[{i}] must be a non-empty string, got {element!r:.60}")
    return list(value)


def _meta(obj: dict) -> dict[str, Any]:
    meta = obj.get("meta")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise _Invalid(f"meta must be an object, got {type(meta).__name__}")
    return meta


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same_option(choice: str, answer: str) -> bool:
    """Equal up to case, whitespace and trailing sentence punctuation (not SQuAD normalisation,
    which would equate "+1" and "-1")."""
    def light(text: str) -> str:
        return " ".join(text.casefold().split()).rstrip(".!?").rstrip()
    return light(choice) == light(answer)

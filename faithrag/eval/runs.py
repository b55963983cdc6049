"""Evaluation run directories read back: a run's manifest and records (`load_run`), the run
directories at or under a path, a run's outcome per item (or one ablation cell's), and its
items grouped by the value of a field (`field_groups`).

A run directory holds two files written by the runner.

``manifest.json``::

    {"dataset": str, "method": str,                      # required
     "model": str, "model_sha256": str, "dataset_sha256": str, "config": dict,
     "code_version": str, "limit": int | null, "seed": int, "created": str (ISO 8601),
     "offset": int,                                      # items skipped (absent before: 0)
     "platform": str,                                    # CPU and llama.cpp build
     "code_versions": [str], "platforms": [str],         # a run resumed under others
     "sweep": {"distractors": 4, ...}}                   # optional: the swept setting(s)

``results.jsonl``, one JSON record per item, appended as items finish::

    {"id": str, "dataset": str, "method": str,
     "prediction": str | null, "gold": [str],
     "correct": bool | null,            # null: no correctness (ranking items, or not scored)
     "parse_status": "ok" | "failed" | "error" | "skipped",
                                        # failed: output not parsed; error: the item raised;
                                        # skipped: no form of the item the method can answer
     "error": str | null,
     "prompt_tokens": int, "completion_tokens": int, "seconds": float,
     "metrics": {"containment": 0|1, "numeric_containment": 0|1, "em": 0|1, "f1": float,
                 "smart_em": 0|1, "attack_success": 0|1, "ndcg@1": float | null,
                 "contrary@1": float | null, ...},
     "trace": {...Trace.summary()...}, "extra": {...}}

Reading rules: a line that is not a JSON object with an "id" (e.g. a line cut short by a crash) is
skipped and reported; when an id occurs more than once (a resumed run) the last record wins and
the duplicates are counted. Items with parse_status "failed" or "error" and a null ``correct``
count as wrong (see metrics.record_correct).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faithrag.errors import DataError
from faithrag.eval.datasets import load_dataset
from faithrag.eval.metrics import cell_correct, record_correct
from faithrag.eval.tables import ordered

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "manifest.json"
RUN_DIR_HINT = "a run directory holds manifest.json and results.jsonl, as written by faithrag eval"


@dataclass
class Run:
    path: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)
    duplicate_records: int = 0
    label: str = ""

    @property
    def dataset(self) -> str:
        return str(self.manifest["dataset"])

    @property
    def method(self) -> str:
        return str(self.manifest["method"])

    @property
    def sweep(self) -> dict[str, Any]:
        sweep = self.manifest.get("sweep")
        return sweep if isinstance(sweep, dict) else {}


def load_run(run_dir: str | Path) -> Run:
    """Read one run directory (see the module docstring for the rules)."""
    path = Path(run_dir)
    manifest_path, results_path = path / MANIFEST_FILE, path / RESULTS_FILE
    if not manifest_path.is_file() or not results_path.is_file():
        raise DataError(f"{path} is not a run directory (needs {MANIFEST_FILE} and "
                        f"{RESULTS_FILE})", hint=RUN_DIR_HINT)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{manifest_path} is not valid JSON: {exc}", hint=RUN_DIR_HINT) from None
    if not isinstance(manifest, dict) or not all(
            isinstance(manifest.get(k), str) and manifest[k] for k in ("dataset", "method")):
        raise DataError(f"{manifest_path} lacks a 'dataset' or 'method' string",
                        hint=RUN_DIR_HINT)
    by_id: dict[str, dict[str, Any]] = {}
    skipped: list[tuple[int, str]] = []
    duplicates = 0
    with results_path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                skipped.append((number, f"invalid JSON: {exc}"))
                continue
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                skipped.append((number, "not a record with a string 'id'"))
                continue
            if record["id"] in by_id:
                duplicates += 1
                del by_id[record["id"]]  # keep the later record, in its position
            by_id[record["id"]] = record
    return Run(path, manifest, list(by_id.values()), skipped, duplicates)


def run_outcomes(run_arg: str, default_cell: str | None = None) -> tuple[Run, dict[str, bool]]:
    """A run and its item id -> right map, over the items it scored. `run_arg` is a run
    directory, or `RUN@CELL` for one ablation cell of a run made with `csrag.ablation_grid`
    (`default_cell` when none is written). ValueError when the run has no such cell."""
    run_dir, _, cell = run_arg.partition("@")
    run, cell = load_run(run_dir), cell or default_cell
    try:
        return run, {r["id"]: c for r in run.records
                     if (c := cell_correct(r, cell) if cell else record_correct(r)) is not None}
    except ValueError as err:
        raise ValueError(f"{run_dir} {err}") from None


def find_run_dirs(paths: Sequence[str | Path]) -> list[Path]:
    """Each path that is a run directory, or else its sub-directories that are (sorted)."""
    found: list[Path] = []
    for given in map(Path, paths):
        if (given / RESULTS_FILE).is_file():
            found.append(given)
            continue
        children = sorted(p.parent for p in given.glob(f"*/{RESULTS_FILE}"))
        if not children:
            raise DataError(f"no run directory at or under {given}", hint=RUN_DIR_HINT)
        found.extend(children)
    return found


def keep_common_items(runs: list[Run]) -> None:
    """Cut every run to the item ids that all runs on its dataset hold (in place)."""
    for dataset in ordered(r.dataset for r in runs):
        same = [r for r in runs if r.dataset == dataset]
        shared = set.intersection(*({rec["id"] for rec in r.records} for r in same))
        for run in same:
            run.records = [rec for rec in run.records if rec["id"] in shared]


def is_ranking(run: Run) -> bool:
    return run.manifest.get("kind") == "rank"


ITEM_PREFIX = "item."


def field_groups(run: Run, field_path: str, ids: Sequence[str],
                 data_dir: str | Path | None = None) -> dict[str, list[str]]:
    """``ids`` grouped by their record's value of ``field_path``, groups in order of first
    appearance: a dotted path into the record (``parse_status``, ``extra.cfrag.decision``), or,
    starting with ``item.``, into the dataset's item read from the data directory
    (``item.conflict_type``, ``item.source``, ``item.meta.KEY``). A missing value is grouped as
    "–"; a list or dict value as its JSON."""
    if field_path.startswith(ITEM_PREFIX):
        items = {item.id: item for item in load_dataset(run.dataset, data_dir).items}
        sources = {i: items.get(i) for i in ids}
        path = field_path[len(ITEM_PREFIX):].split(".")
    else:
        records = {r["id"]: r for r in run.records}
        sources = {i: records.get(i) for i in ids}
        path = field_path.split(".")
    groups: dict[str, list[str]] = {}
    for item_id, value in sources.items():
        for key in path:
            value = (value.get(key) if isinstance(value, dict)
                     else getattr(value, key, None) if value is not None else None)
        text = ("–" if value is None else value if isinstance(value, str)
                else json.dumps(value, ensure_ascii=False, default=str))
        groups.setdefault(text, []).append(item_id)
    return groups

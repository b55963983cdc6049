"""Keep evaluation runs in a repository folder, so a measurement survives a new machine and
resumes there.

A run directory (`faithrag eval`, `faithrag hostile run`) lives outside the repository and is
lost with the machine. ``save_runs(source, target)`` copies every run directory under
``source`` (its manifest.json and results.jsonl) to the same relative place under ``target``,
without the fields that repeat the benchmark data (gold answers and answer options, also where
they key the options' probabilities) and without lines cut short by a crash; the data itself is
read from the data directory at run time and never copied. ``restore_runs(source, target)``
copies them back into a runs folder, keeping a run there that already holds as many records or
more; the runner resumes from them (it needs only the ids already done, and a hostile run's own
knowledge base is pointed at its new folder), and `faithrag report` / `faithrag hostile report`
read them as they are (neither reads the dropped fields). Both return the number of runs found.

Example::

    save_runs("runs/hostile", "results/hostile")      # after a run
    restore_runs("results/hostile", "runs/hostile")   # on a new machine, then resume the run
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from faithrag.eval.hostile_runner import KB_DIR
from faithrag.eval.report import MANIFEST_FILE, RESULTS_FILE

DATA_FIELDS = ("gold", "choices")  # copies of the benchmark data in a record


def run_dirs(root: str | Path) -> list[Path]:
    """The run directories (manifest.json + results.jsonl) at or under ``root``, sorted."""
    return sorted(p.parent for p in Path(root).rglob(MANIFEST_FILE)
                  if (p.parent / RESULTS_FILE).is_file())


def strip_record(line: str) -> str | None:
    """The record without its data fields; None for a line that is not a complete record (a
    line cut by a crash is left behind, the runner redoes that item)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict) or "id" not in record:
        return None
    for key in DATA_FIELDS:
        record.pop(key, None)
    extra = record.get("extra")
    if isinstance(extra, dict) and isinstance(extra.get("choice_probabilities"), dict):
        # keyed by the option texts: keep the probabilities, in option order
        extra["choice_probabilities"] = list(extra["choice_probabilities"].values())
    return json.dumps(record, ensure_ascii=False)


def save_runs(source: str | Path, target: str | Path) -> int:
    """Copy every run under ``source`` to ``target`` without its data fields."""
    source, target = Path(source), Path(target)
    runs = run_dirs(source)
    for run in runs:
        dest = target / run.relative_to(source)
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run / MANIFEST_FILE, dest / MANIFEST_FILE)
        lines = (strip_record(line) for line in
                 (run / RESULTS_FILE).read_text(encoding="utf-8").splitlines())
        kept = [line for line in lines if line is not None]
        (dest / RESULTS_FILE).write_text("".join(f"{line}\n" for line in kept),
                                         encoding="utf-8")
    return len(runs)


def restore_runs(source: str | Path, target: str | Path) -> int:
    """Copy saved runs into ``target``; a run already there with as many records or more is
    kept."""
    source, target = Path(source), Path(target)
    runs = run_dirs(source)
    for run in runs:
        dest = target / run.relative_to(source)
        here = dest / RESULTS_FILE
        if here.is_file() and _count(here) >= _count(run / RESULTS_FILE):
            continue
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run / RESULTS_FILE, here)
        manifest = json.loads((run / MANIFEST_FILE).read_text(encoding="utf-8"))
        (dest / MANIFEST_FILE).write_text(json.dumps(_relocate(manifest, dest), indent=2),
                                          encoding="utf-8")
    return len(runs)


def _relocate(manifest: dict[str, Any], dest: Path) -> dict[str, Any]:
    """A hostile verifier run records the absolute path of the knowledge base it built in its
    own folder (`<run>/trusted_kb`, rebuilt from the data when missing); point it at the new
    folder, or the resumed run would be refused as a change of configuration."""
    antisyco = manifest.get("config", {}).get("antisyco", {})
    kb = antisyco.get("kb")
    if kb and Path(kb).name == KB_DIR and Path(kb).parent.name == dest.name:
        antisyco["kb"] = str((dest / KB_DIR).resolve())
    return manifest


def _count(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())

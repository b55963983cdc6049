"""Keep benchmark runs in the repository, so a measurement survives a new machine and resumes.

A run directory (`faithrag eval`, `faithrag hostile run`) lives outside the repository and is
lost with the machine. `save` copies each run's manifest.json and results.jsonl under a
repository folder, without the fields that repeat the benchmark data (gold answers and answer
options, also where they key the options' probabilities): the data is read from ../shared/data
at run time and never copied into the repository. `restore` copies them back into a runs
folder: the runner resumes from them (it only needs the ids already done, and a hostile run's
own knowledge base is pointed at the new folder), and `faithrag report` / `faithrag hostile
report` read them as they are (neither reads those fields).

    python benchmarks/bank_runs.py save /work/runs/hostile --to results/hostile
    python benchmarks/bank_runs.py restore results/hostile --to /work/runs/hostile
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from faithrag.eval.hostile_runner import KB_DIR

DATA_FIELDS = ("gold", "choices")  # copies of the benchmark data in a record


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("manifest.json")
                  if (p.parent / "results.jsonl").is_file())


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


def save(source: Path, target: Path) -> int:
    runs = run_dirs(source)
    for run in runs:
        dest = target / run.relative_to(source)
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run / "manifest.json", dest / "manifest.json")
        lines = (strip_record(line) for line in
                 (run / "results.jsonl").read_text(encoding="utf-8").splitlines())
        kept = [line for line in lines if line is not None]
        (dest / "results.jsonl").write_text("".join(f"{line}\n" for line in kept),
                                            encoding="utf-8")
        print(f"{dest}: {len(kept)} records")
    return len(runs)


def restore(source: Path, target: Path) -> int:
    """Copy banked runs into `target`; a run already there with more records is kept."""
    runs = run_dirs(source)
    for run in runs:
        dest = target / run.relative_to(source)
        here = dest / "results.jsonl"
        if here.is_file() and _count(here) >= _count(run / "results.jsonl"):
            print(f"{dest}: kept (it holds as many records or more)")
            continue
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run / "results.jsonl", here)
        manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
        (dest / "manifest.json").write_text(json.dumps(relocate(manifest, dest), indent=2),
                                            encoding="utf-8")
        print(f"{dest}: {_count(here)} records restored")
    return len(runs)


def relocate(manifest: dict, dest: Path) -> dict:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("save", "restore"))
    parser.add_argument("source", type=Path, help="folder holding run directories")
    parser.add_argument("--to", type=Path, required=True, help="folder to copy them into")
    args = parser.parse_args()
    if not args.source.is_dir():
        parser.error(f"{args.source} is not a folder")
    count = (save if args.action == "save" else restore)(args.source, args.to)
    if not count:
        parser.error(f"no run directory (manifest.json + results.jsonl) under {args.source}")


if __name__ == "__main__":
    main()

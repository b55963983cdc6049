"""Shared by the tests of the scripts under benchmarks/.

Those scripts are plain files, not a package; the tests import them by name, with benchmarks/ put
on sys.path."""
import json
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


@pytest.fixture
def write_run():
    """Writes a toy run folder as `faithrag eval` leaves it: manifest.json and results.jsonl."""
    def write(folder: Path, manifest: dict, records: list[dict]) -> Path:
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps(manifest))
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return folder
    return write


@pytest.fixture
def write_data_dir():
    """Writes a toy dataset's dev split, root/<dataset>/dev.jsonl, as the data folder holds it."""
    def write(root: Path, dataset: str, items: list[dict]) -> Path:
        (root / dataset).mkdir(parents=True)
        (root / dataset / "dev.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
        return root
    return write


@pytest.fixture
def fake_executable(tmp_path):
    """Writes an executable standing in for `faithrag` (or a Python) in the scripts' recipes:
    it records each call's arguments, makes the directory each `--out` names (or writes a
    report to an `--out` file ending in .md), prints a line, runs `body` and exits 0. Returns
    (its path, a function giving the calls so far, one argument list each)."""
    def make(name: str = "faithrag", body: str = "") -> tuple[str, object]:
        log = tmp_path / f"{name}-calls.jsonl"
        script = tmp_path / name
        script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""\
            import json, os, sys
            args = sys.argv[1:]
            with open({str(log)!r}, "a") as log:
                log.write(json.dumps(args) + "\\n")
            for flag, value in zip(args, args[1:]):
                if flag == "--out" and value.endswith(".md"):
                    open(value, "w").write("report\\n")
                elif flag == "--out":
                    os.makedirs(value, exist_ok=True)
            print("output of", *args[:2])
            """) + textwrap.dedent(body))
        script.chmod(0o755)
        return str(script), lambda: [json.loads(line) for line in log.read_text().splitlines()]
    return make

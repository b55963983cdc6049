"""Shared by the tests of the scripts under benchmarks/.

Those scripts are plain files, not a package; the tests import them by name, with benchmarks/ put
on sys.path."""
import json
import sys
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

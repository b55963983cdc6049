"""`faithrag eval`: an extra the run needs is named before its run directory is written."""

import json
import sys

import pytest

from faithrag.cli import main

ITEM = {"id": "1", "question": "When did the bridge open?", "answer": "1887",
        "context": [{"title": "Bridge", "text": "The bridge opened in 1887."}]}


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps(ITEM) + "\n")
    return path


@pytest.mark.parametrize("missing, args, extra", [
    ("ray", ["--ray"], "ray"),
    ("ray", ["--ray-address", "ray://head:10001"], "ray"),
    ("llama_cpp", ["--set", "llm.backend=llamacpp"], "llamacpp"),
    ("faiss", ["--context", "retrieval", "--set", "retrieval.mode=dense"], "dense"),
    ("lancedb", ["--verify", "antisyco", "--kb", "lancedb:/tmp/nowhere"], "lancedb"),
])
def test_a_missing_extra_is_reported_before_the_run_directory_is_written(
        tmp_path, data, capsys, monkeypatch, missing, args, extra):
    monkeypatch.setitem(sys.modules, missing, None)  # as if it were not installed
    out = tmp_path / "run"
    assert main(["eval", "--file", str(data), "--out", str(out), "--no-progress",
                 "--set", "llm.backend=fake", *args]) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert f"needs the optional extra '{extra}'" in err
    assert f"pip install 'faithrag[{extra}]'" in err


def test_workers_on_a_joined_cluster_load_the_model_in_their_own_environment(monkeypatch):
    import argparse

    from faithrag.cli.eval import needs
    from faithrag.config import Config

    config = Config.load()  # the embedded backend
    args = argparse.Namespace(ray=True, ray_address="ray://head:10001", context="given")
    assert [extra for _, extra in needs(args, config)] == ["ray"]
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    local = argparse.Namespace(ray=True, ray_address=None, context="given")
    assert [extra for _, extra in needs(local, config)] == ["ray", "llamacpp"]


def test_the_suite_runs_both_ways_writes_its_report_and_reports_again(tmp_path, monkeypatch,
                                                                      capsys):
    from faithrag.eval.suite_slices import SLICES, SliceSpec, SuiteItem
    from faithrag.types import Passage, Question

    toy = [SuiteItem("toy", str(n), Question(f"Who did thing {n}?"),
                     [Passage(f"{n}#c0", f"Mutemath did thing {n}.")], ["Mutemath"])
           for n in range(2)]
    monkeypatch.setitem(SLICES, "toy", SliceSpec("clean", lambda data_dir: toy))
    out = tmp_path / "suite"
    assert main(["eval", "--suite", "conflicts", "--report", "--out", str(out)]) == 2
    assert "Run without --report first" in capsys.readouterr().err
    args = ["eval", "--suite", "conflicts", "--slices", "toy", "--out", str(out),
            "--set", "llm.backend=fake", "--no-progress"]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "| toy | clean | 2 |" in table and "**all items**" in table
    assert (out / "report.md").read_text() == table
    assert json.loads((out / "summary.json").read_text())["overall"]["n"] == 2
    assert main(["eval", "--suite", "conflicts", "--report", "--out", str(out)]) == 0
    assert capsys.readouterr().out == table
    assert main([*args[:-1], "--shard", "x"]) == 2
    assert "--shard I/N" in capsys.readouterr().err
    later = tmp_path / "later"
    assert main([*args[:6], str(later), *args[7:], "--per-slice", "2", "--skip", "1"]) == 0
    assert "| toy | clean | 1 |" in capsys.readouterr().out  # the item the first one left
    assert main([*args[:6], str(later), *args[7:], "--skip", "30"]) == 2
    assert "--skip takes" in capsys.readouterr().err

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

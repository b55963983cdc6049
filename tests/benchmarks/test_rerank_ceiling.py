import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "rerank_ceiling", Path(__file__).resolve().parents[2] / "benchmarks" / "rerank_ceiling.py")
rerank_ceiling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rerank_ceiling)


def passage(pid, relevance, contrary=False):
    return {"pid": pid, "text": f"Passage {pid}.", "relevance": relevance, "is_contrary": contrary}


def write(tmp_path, rankings):
    """Three items, each: c (contrary), r (relevance 2), s (relevance 1), x (irrelevant)."""
    items = [{"id": f"toy::{i}", "query": f"Question {i}?",
              "passages": [passage("c", 0, True), passage("r", 2), passage("s", 1),
                           passage("x", 0)]} for i in range(len(rankings))]
    (tmp_path / "data/toyrank").mkdir(parents=True)
    (tmp_path / "data/toyrank/dev.jsonl").write_text(
        "".join(json.dumps(item) + "\n" for item in items))
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"dataset": "toyrank", "kind": "rank",
                                                   "method": "none", "model": "fake"}))
    (run / "results.jsonl").write_text("".join(
        json.dumps({"id": f"toy::{i}", "ranking": ranking, "correct": None}) + "\n"
        for i, ranking in enumerate(rankings)))
    return run, tmp_path / "data"


def test_removing_the_contrary_passage_lifts_only_the_items_it_led(tmp_path):
    # contrary first then the best; contrary first then the second best; already the best first
    run, data = write(tmp_path, [["c", "r", "s", "x"], ["c", "s", "r", "x"], ["r", "c", "s", "x"]])
    c = rerank_ceiling.ceiling(str(run), str(data))
    assert c["n"] == 3 and c["contrary@1"] == pytest.approx(2 / 3)
    assert c["ndcg@1"] == pytest.approx(1 / 3)  # 0, 0, 1
    second = (2**1 - 1) / (2**2 - 1)  # nDCG@1 of the relevance-1 passage first
    assert c["ndcg@1_without_contrary"] == pytest.approx((1 + second + 1) / 3)
    assert c["gain"] == pytest.approx((1 + second) / 3)


def test_the_table_has_a_row_per_run(tmp_path, capsys, monkeypatch):
    run, data = write(tmp_path, [["r", "c", "s", "x"]])
    monkeypatch.setattr("sys.argv", ["rerank_ceiling.py", str(run), "--data-dir", str(data)])
    rerank_ceiling.main()
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[2].endswith("| 1.000 [1.000, 1.000] | +0.000 |")

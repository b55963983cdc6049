from __future__ import annotations

import pytest

from faithrag.eval import metrics as M
from faithrag.eval.stats import wilson_interval


def test_aggregate_records() -> None:
    records = [
        {"id": "1", "correct": True, "parse_status": "ok", "prompt_tokens": 100,
         "completion_tokens": 10, "seconds": 1.0, "metrics": {"em": 1, "f1": 1.0}},
        {"id": "2", "correct": False, "parse_status": "ok", "prompt_tokens": 200,
         "completion_tokens": 30, "seconds": 3.0, "metrics": {"em": 0, "f1": 0.5}},
        {"id": "3", "correct": None, "parse_status": "failed", "prompt_tokens": 300,
         "completion_tokens": 20, "seconds": 2.0, "metrics": {"em": 0, "f1": None}},
        {"id": "4", "correct": None, "parse_status": "error", "error": "boom",
         "seconds": 0.5, "metrics": {}},
        {"id": "5", "correct": None, "parse_status": "skipped", "metrics": {}},
    ]
    agg = M.aggregate(records)
    assert (agg["n"], agg["n_scored"], agg["correct"]) == (5, 4, 1)
    assert agg["accuracy"] == 0.25
    assert agg["accuracy_ci"] == pytest.approx(list(wilson_interval(1, 4)))
    assert (agg["parse_failures"], agg["failed_items"], agg["skipped_items"]) == (1, 1, 1)
    assert agg["parse_failure_rate"] == 0.25  # of the 4 items asked: the skipped one was not
    assert agg["mean_prompt_tokens"] == 200 and agg["mean_completion_tokens"] == 20
    assert agg["mean_seconds"] == pytest.approx(6.5 / 4) and agg["total_seconds"] == 6.5
    assert agg["metrics"]["em"]["mean"] == pytest.approx(1 / 3)
    assert agg["metrics"]["em"]["ci"] == pytest.approx(list(wilson_interval(1, 3)))
    assert agg["metrics"]["f1"] == {"mean": 0.75, "n": 2, "undefined": 1,
                                    "ci": agg["metrics"]["f1"]["ci"]}
    assert agg["metrics"]["f1"]["ci"][0] <= 0.75 <= agg["metrics"]["f1"]["ci"][1]


def test_aggregate_without_scored_items() -> None:
    agg = M.aggregate([{"id": "r", "correct": None, "parse_status": "ok",
                        "metrics": {"ndcg@1": 0.5}}])
    assert agg["accuracy"] is None and agg["accuracy_ci"] is None
    assert agg["metrics"]["ndcg@1"]["mean"] == 0.5
    assert M.aggregate([])["n"] == 0


def test_cell_correct_reads_one_ablation_cell_and_counts_a_failed_item_wrong():
    record = {"gold_index": 1, "parse_status": "ok", "correct": True,
              "extra": {"variants": {"a=0 b=0": {"choice_index": 0},
                                     "a=-1 b=3": {"choice_index": 1}}}}
    assert M.cell_correct(record, "a=0 b=0") is False
    assert M.cell_correct(record, "a=-1 b=3") is True
    assert M.cell_correct({"parse_status": "error", "extra": {}}, "a=0 b=0") is False
    assert M.cell_correct({"parse_status": "skipped"}, "a=0 b=0") is None
    with pytest.raises(ValueError, match="has no cell 'a=9 b=9'; it has a=0 b=0, a=-1 b=3"):
        M.cell_correct(record, "a=9 b=9")

"""One run against others, paired: whole, per slice, per field, and for re-rankers."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_doubles import make_run, qa_items, rank_run, ranked, record, write_set

from faithrag.errors import DataError
from faithrag.eval.paired_report import item_slice, paired_report
from faithrag.eval.stats import mcnemar_exact_p

RANK_PASSAGES = [{"pid": "c", "text": "C.", "relevance": 0, "is_contrary": True},
                 {"pid": "r", "text": "R.", "relevance": 2, "is_contrary": False},
                 {"pid": "x", "text": "X.", "relevance": 0, "is_contrary": False}]


def test_item_slices_are_checked() -> None:
    assert item_slice("20:100") == slice(20, 100)
    for bad in ("20", "100:20", "a:b", "-1:3"):
        with pytest.raises(ValueError, match="not a slice"):
            item_slice(bad)


def test_paired_report_pairs_the_first_run_with_each_other_run_per_slice(tmp_path: Path) -> None:
    data = write_set(tmp_path / "data", "d", qa_items(4))
    # written out of the dataset's order: slices follow the dataset, not the file
    a = make_run(tmp_path, "a", "d", "cfrag", [record("q3", True), record("q0", True),
                                               record("q1", True), record("q2", False)])
    b = make_run(tmp_path, "b", "d", "vanilla", [record("q0", False), record("q1", True),
                                                 record("q2", False)])
    c = make_run(tmp_path, "c", "d", "cot", [record("q0", True)])
    table = paired_report([str(a), str(b), str(c)], [item_slice("0:2"), item_slice("2:4")],
                          data_dir=data)
    rows = [line for line in table.splitlines() if line.startswith(f"| {tmp_path}")]
    assert rows[0].startswith(f"| {b} | 1–2 | 2 | 100.0 [34.2, 100.0] | 50.0 ")
    assert rows[0].endswith(f"| +50.0 [+0.0, +100.0] | 1 / 0 | {mcnemar_exact_p(1, 0):.2g} |")
    assert rows[1].startswith(f"| {b} | 3–4 | 1 | 0.0 ")  # q3 is not in b
    assert rows[2].startswith(f"| {c} | 1–2 | 1 | 100.0 ") and "| 0 / 0 | 1 |" in rows[2]
    assert rows[3] == f"| {c} | 3–4 | 0 |  |  |  |  |  |"
    whole = paired_report([str(a), str(b)])
    assert f"| {b} | all | 3 | 66.7 " in whole and "## Rankings" not in whole


def test_paired_report_refuses_what_cannot_be_paired(tmp_path: Path) -> None:
    a = make_run(tmp_path, "a", "d", "m", [record("q0", True)])
    other = make_run(tmp_path, "b", "other", "m", [record("q0", True)])
    with pytest.raises(DataError, match="two runs or more"):
        paired_report([str(a)])
    with pytest.raises(DataError, match="is on other"):
        paired_report([str(a), str(other)])
    grid = make_run(tmp_path, "grid", "d", "csrag", [record(
        "q0", True, gold_index=0, extra={"variants": {"a=0 b=0": {"choice_index": 0}}})])
    with pytest.raises(DataError, match="no cell 'a=9 b=9'") as err:
        paired_report([f"{grid}@a=9 b=9", str(a)])
    assert "name a cell" in err.value.hint


def test_paired_report_of_rerankers_pairs_rankings_and_splits_off_the_removals(tmp_path: Path
                                                                               ) -> None:
    data = write_set(tmp_path / "data", "toy", [
        {"id": q, "query": "Q?", "passages": RANK_PASSAGES} for q in ("q0", "q1", "q2")])
    # q0: A's removal of c lifts r to the top; q1: A puts r first itself; q2: both keep x first
    crossval = rank_run(tmp_path, "crossval", [
        ranked("q0", ["r", "x"], True, removed=("c",)), ranked("q1", ["r", "x", "c"], True),
        ranked("q2", ["x", "r", "c"], False),
        record("q3", None, "error", error="RuntimeError: boom")])
    none = rank_run(tmp_path, "none", [
        ranked("q0", ["c", "r", "x"], False), ranked("q1", ["x", "r", "c"], True),
        ranked("q2", ["x", "r", "c"], False)])
    table = paired_report([str(crossval), str(none)], data_dir=data)
    assert f"| {none} | all | 3 | 66.7 [20.8, 93.9] | 33.3 " in table  # the answers
    row = next(line for line in table.splitlines() if line.startswith(f"| {none} | 3 |"))
    assert row.startswith(f"| {none} | 3 | 0.667 | 0.000 | +0.667 ")
    assert "| 0.0 | 33.3 | 0 / 1, p 1 (n 3) | 1 / 1 |" in row  # q2 same order and first
    assert ("nDCG@1 0.000 → 0.333 without A's removed passages (removals +0.333) → 0.667 as A "
            "ranks them (ordering +0.333); contrary@1 33.3 → 0.0 → 0.0 %") in table
    # a re-ranker that removed nothing has no split, and needs no data
    assert "removals" not in paired_report([str(none), str(crossval)], data_dir=tmp_path / "no")

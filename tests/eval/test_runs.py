"""Run directories read back: a run's outcomes, its items grouped by a field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_doubles import make_run, qa_items, record, write_set

from faithrag.eval.runs import field_groups, load_run, run_outcomes


def test_run_outcomes_reads_a_run_or_one_ablation_cell_of_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"dataset": "set", "method": "csrag"}))
    cells = {"a=0 b=0": {"choice_index": 0}, "a=-1 b=3": {"choice_index": 1}}
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "x", "correct": True, "gold_index": 1, "extra": {"variants": cells}},
        {"id": "y", "correct": None, "parse_status": "skipped"}]))
    assert run_outcomes(str(run))[1] == {"x": True}
    assert run_outcomes(str(run), default_cell="a=0 b=0")[1] == {"x": False}
    assert run_outcomes(f"{run}@a=-1 b=3", default_cell="a=0 b=0")[1] == {"x": True}
    with pytest.raises(ValueError, match=f"{run} has no cell 'a=9 b=9'"):
        run_outcomes(f"{run}@a=9 b=9")


def test_field_groups_read_the_record_or_the_datasets_item(tmp_path: Path) -> None:
    data = write_set(tmp_path / "data", "d", [
        {**item, "conflict_type": kind, "meta": {"hops": hops}} for item, kind, hops in zip(
            qa_items(3), ["temporal", "misleading", "temporal"], [2, 3, None])])
    run = load_run(make_run(tmp_path, "r", "d", "cfrag", [
        record("q0", True, extra={"cfrag": {"decision": "consensus"}}),
        record("q1", False, extra={"cfrag": {"decision": "synthesis"}}),
        record("q2", True, extra={"cfrag": {"decision": "consensus"}})]))
    ids = ["q0", "q1", "q2"]
    assert field_groups(run, "extra.cfrag.decision", ids) == {"consensus": ["q0", "q2"],
                                                              "synthesis": ["q1"]}
    assert field_groups(run, "item.conflict_type", ids, data) == {"temporal": ["q0", "q2"],
                                                                  "misleading": ["q1"]}
    assert field_groups(run, "item.meta.hops", ids, data) == {"2": ["q0"], "3": ["q1"],
                                                              "–": ["q2"]}
    assert field_groups(run, "extra.nothing.here", ["q0"]) == {"–": ["q0"]}

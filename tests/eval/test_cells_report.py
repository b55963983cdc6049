"""Ablation cells of a grid run against the unbiased cell."""

from __future__ import annotations

import json
from pathlib import Path

from report_doubles import make_run, record

from faithrag.eval.cells_report import cell_outcomes, cells_report
from faithrag.eval.paired_report import paired_report
from faithrag.eval.runs import load_run


def test_cells_report_tabulates_every_cell_of_a_grid_run_against_plain_scoring(tmp_path: Path
                                                                              ) -> None:
    from faithrag import registry
    from faithrag.config import Config
    from faithrag.eval.runner import EvalSpec, run_eval
    from faithrag.llm.fake import FakeLLM
    from faithrag.methods.csrag import ABLATION_GRID
    from faithrag.pipeline import Pipeline

    data = tmp_path / "set.jsonl"  # the context says Sydney; the fake "remembers" Canberra
    data.write_text("".join(json.dumps({
        "id": f"t::{i}", "question": "What is the capital of Australia?",
        "context": "Since 2031 the capital is Sydney.", "choices": ["Canberra", "Sydney"],
        "answer_idx": 1, "answer": "Sydney", "answers": ["Sydney"]}) + "\n" for i in range(3)))
    config = Config.load(None, {"llm.backend": "fake", "csrag.ablation_grid": True,
                                "csrag.enhance_context": False, "use_cache": False})
    llm = FakeLLM(lambda r: "- Canberra is the capital." if r.purpose == "facts" else "Sydney",
                  choice_prior={"Canberra": 0.0, "Sydney": -1.5}.__getitem__)
    spec = EvalSpec("set", method="csrag_choices", file=str(data))
    run_eval(spec, config, tmp_path / "run", llm, lambda cfg, model, retriever: Pipeline(
        registry.build("generator", spec.method, model, cfg, retriever), retriever),
        progress=False)

    outcomes, failed = cell_outcomes(load_run(tmp_path / "run").records)
    assert failed == 0 and list(outcomes) == [c.label for c in ABLATION_GRID]
    assert outcomes["a=0 b=0"] == [False] * 3 and outcomes["a=-1 b=3"] == [True] * 3
    table = cells_report([tmp_path / "run"])
    assert "## run (n = 3, failed items 0)" in table
    assert "| a=-1 b=3 | 100.0 [43.9, 100.0] | +100.0 [+100.0, +100.0] | 3 / 0 |" in table
    assert "| 100 % |" in table and "Time per item (median): scoring" in table
    assert paired_report([f"{tmp_path / 'run'}@a=-1 b=3", f"{tmp_path / 'run'}@a=0 b=0"]
                         ).count("| 3 / 0 |") == 1


def test_cell_outcomes_count_failed_items_wrong_and_leave_skipped_ones_out() -> None:
    cells = {"a=0 b=0": {"choice_index": 0}, "a=-1 b=3": {"choice_index": 1}}
    records = [{"parse_status": "error", "extra": {}}, {"parse_status": "skipped"},
               {"parse_status": "ok", "gold_index": 0, "extra": {"variants": cells}},
               # a run made before a cell was added: only the cells every item has
               {"parse_status": "ok", "gold_index": 0,
                "extra": {"variants": {"a=0 b=0": {"choice_index": 0}}}}]
    outcomes, failed = cell_outcomes(records)
    assert failed == 1 and outcomes == {"a=0 b=0": [False, True, True]}


def test_cells_report_times_fresh_and_cached_steps_apart(tmp_path: Path) -> None:
    def timed(item_id: str, facts: float, paraphrase: float, seconds: float) -> dict:
        return record(item_id, True, seconds=seconds, gold_index=0,
                      extra={"variants": {"a=0 b=0": {"choice_index": 0}}},
                      trace={"stages": [{"stage": "facts", "seconds": facts},
                                        {"stage": "paraphrase", "seconds": paraphrase},
                                        {"stage": "generate", "seconds": 10,
                                         "prompt_tokens": 100 * seconds}]})
    run = make_run(tmp_path, "grid", "d", "csrag", [
        timed("q0", 10, 40, 1), timed("q1", 30, 50, 3), timed("q2", 0.01, 0.0, 2)])
    table = cells_report([run])
    assert ("Time per item (median): scoring 10.0 s; facts 20.0 s (2 generated, 1 cached); "
            "(facts + scoring) / scoring 3.00×.") in table
    assert ("Scoring prompt tokens (mean) 200; paraphrases 45.0 s (2 generated, 1 cached), "
            "whole item with them generated 2.0 s; whole item 2.0 s (median).") in table

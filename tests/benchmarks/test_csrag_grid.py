import json

import csrag_grid

from faithrag import registry
from faithrag.config import Config
from faithrag.eval.runner import EvalSpec, run_eval
from faithrag.llm.fake import FakeLLM
from faithrag.methods.csrag import ABLATION_GRID
from faithrag.pipeline import Pipeline


def write_set(path):
    """Three items whose context says Sydney; the fake model "remembers" Canberra."""
    path.write_text("".join(json.dumps({
        "id": f"t::{i}", "question": "What is the capital of Australia?",
        "context": "Since 2031 the capital is Sydney.", "choices": ["Canberra", "Sydney"],
        "answer_idx": 1, "answer": "Sydney", "answers": ["Sydney"]}) + "\n" for i in range(3)))
    return path


def responder(request):
    return "- Canberra is the capital." if request.purpose == "facts" else "Sydney"


def test_grid_run_reports_every_cell_against_plain_scoring(tmp_path):
    config = Config.load(None, {"llm.backend": "fake", "csrag.ablation_grid": True,
                                "csrag.enhance_context": False, "use_cache": False})
    llm = FakeLLM(responder, choice_prior={"Canberra": 0.0, "Sydney": -1.5}.__getitem__)
    spec = EvalSpec("set", method="csrag_choices", file=str(write_set(tmp_path / "set.jsonl")))
    run_eval(spec, config, tmp_path / "run", llm, lambda cfg, model, retriever: Pipeline(
        registry.build("generator", spec.method, model, cfg, retriever), retriever), progress=False)

    outcomes, failed = csrag_grid.cell_outcomes(csrag_grid.load_records(tmp_path / "run"))
    assert failed == 0 and list(outcomes) == [c.label for c in ABLATION_GRID]
    assert outcomes["a=0 b=0"] == [False] * 3 and outcomes["a=-1 b=3"] == [True] * 3
    table = "\n".join(csrag_grid.run_table(tmp_path / "run"))
    assert "| a=-1 b=3 | 100.0 [43.9, 100.0] | +100.0" in table
    assert "| 3 / 0 |" in table and "100 %" in table


def test_failed_items_count_wrong_in_every_cell_and_skipped_items_not_at_all():
    records = [{"parse_status": "error", "extra": {}},
               {"parse_status": "skipped"},
               {"parse_status": "ok", "gold_index": 0,
                "extra": {"variants": {c.label: {"choice_index": 0} for c in ABLATION_GRID}}}]
    outcomes, failed = csrag_grid.cell_outcomes(records)
    assert failed == 1
    assert all(seen == [False, True] for seen in outcomes.values())


def test_missing_run_is_a_clear_error(tmp_path, capsys):
    assert csrag_grid.main([str(tmp_path / "nowhere")]) == 2
    assert "no results.jsonl" in capsys.readouterr().err


def test_timing_separates_cached_facts_and_gives_the_median_ratio():
    def record(facts, scoring):
        return {"extra": {"variants": {"a=0 b=0": {"choice_index": 0}}},
                "trace": {"stages": [{"stage": "facts", "seconds": facts},
                                     {"stage": "bias", "seconds": 0.01},
                                     {"stage": "generate", "seconds": scoring}]}}
    line = csrag_grid.timing_line([record(10, 10), record(30, 10), record(0.01, 12),
                                   {"extra": {}, "trace": {}}])
    assert "scoring 10.0 s" in line and "facts 20.0 s (2 generated, 1 cached)" in line
    assert "scoring 3.00×" in line
    assert csrag_grid.timing_line([record(0.0, 5)]).endswith("facts all cached")


def test_a_run_made_before_a_cell_was_added_is_tabulated_without_it():
    old_cells = [c.label for c in ABLATION_GRID if "+case" not in c.label]
    records = [{"parse_status": "ok", "gold_index": 0,
                "extra": {"variants": {label: {"choice_index": 0} for label in old_cells}}}]
    outcomes, failed = csrag_grid.cell_outcomes(records)
    assert list(outcomes) == old_cells and failed == 0


def test_cost_line_counts_cached_paraphrases_apart_and_reports_whole_items():
    def record(paraphrase, seconds, tokens):
        return {"seconds": seconds, "extra": {"variants": {"a=0 b=0": {"choice_index": 0}}},
                "trace": {"stages": [{"stage": "paraphrase", "seconds": paraphrase},
                                     {"stage": "generate", "seconds": 5, "prompt_tokens": tokens}]}}
    line = csrag_grid.cost_line([record(40, 60, 100), record(50, 80, 200), record(0.0, 10, 300),
                                 {"extra": {}, "trace": {}}])
    assert line == ("scoring prompt tokens (mean) 200; paraphrases 45.0 s (2 generated, 1 cached), "
                    "whole item with them generated 70.0 s; whole item 60.0 s (median)")
    assert csrag_grid.cost_line([record(0.0, 10, 300)]) == (
        "scoring prompt tokens (mean) 300; paraphrases all cached; whole item 10.0 s (median)")

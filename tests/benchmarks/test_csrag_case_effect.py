import csrag_case_effect
import pytest

ANSWERS = {"t::0": "January 2012", "t::1": "1996", "t::2": "Sydney", "t::3": "sonar"}


ITEMS = [{"id": item_id, "question": "When?", "context": f"It was {answer}.",
          "answer": answer, "answers": [answer]} for item_id, answer in ANSWERS.items()]


def record(item_id: str, gold: dict[str, float], with_case: bool = True) -> dict:
    """A grid record whose gold option (index 0) has the given probability per cell."""
    variants = {cell: {"choice_index": 0, "probabilities": [p, 1 - p]} for cell, p in gold.items()
                if with_case or not cell.endswith("+case")}
    return {"id": item_id, "dataset": "tiny", "gold_index": 0, "extra": {"variants": variants}}


MANIFEST = {"dataset": "tiny", "method": "csrag_json_scored"}


def test_counts_items_whose_gold_probability_falls_under_each_cell_split_by_capitals(
        tmp_path, write_run, write_data_dir):
    write_data_dir(tmp_path / "data", "tiny", ITEMS)
    run = write_run(tmp_path / "run", MANIFEST, [
        record("t::0", {"a=0 b=0": 0.6, "a=-1 b=3": 0.4, "a=-1 b=3 +case": 0.9}),
        record("t::1", {"a=0 b=0": 0.6, "a=-1 b=3": 0.8, "a=-1 b=3 +case": 0.5}),
        record("t::2", {"a=0 b=0": 0.6, "a=-1 b=3": 0.6, "a=-1 b=3 +case": 0.7}),  # unchanged: not lowered
        {"id": "t::3", "dataset": "tiny", "parse_status": "skipped", "extra": {}},  # no options scored
    ])
    table = csrag_case_effect.report([run], str(tmp_path / "data")).splitlines()
    assert table[2] == "| run | a=-1 b=3 | 1 / 2 (50 %) | 0 / 1 (0 %) |"
    assert table[3] == "| run | a=-1 b=3 +case | 0 / 2 (0 %) | 1 / 1 (100 %) |"


def test_a_run_without_the_case_cell_shows_a_dash(tmp_path, write_run, write_data_dir):
    write_data_dir(tmp_path / "data", "tiny", ITEMS)
    run = write_run(tmp_path / "old", MANIFEST, [
        record("t::0", {"a=0 b=0": 0.6, "a=-1 b=3": 0.4, "a=-1 b=3 +case": 0.9}, with_case=False)])
    table = csrag_case_effect.report([run], str(tmp_path / "data")).splitlines()
    assert table[2] == "| old | a=-1 b=3 | 1 / 1 (100 %) | – |"
    assert table[3] == "| old | a=-1 b=3 +case | – | – |"


def test_a_folder_without_results_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        csrag_case_effect.main([str(tmp_path)])
    assert exit_.value.code == 2
    assert "no results.jsonl" in capsys.readouterr().err

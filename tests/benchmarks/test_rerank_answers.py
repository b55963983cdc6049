import pytest
import rerank_answers


def record(qid, contrary_first, correct, **answer_metrics):
    return {"id": qid, "ranking": ["p"], "correct": correct, "parse_status": "ok",
            "metrics": {"ndcg@1": 1.0, "contrary@1": float(contrary_first), **answer_metrics}}


def test_answers_are_split_by_the_first_passage_and_unscored_queries_left_out(
        tmp_path, write_run):
    run = write_run(tmp_path / "none", {"dataset": "toy", "kind": "rank", "method": "vanilla"}, [
        record("q0", True, False, contrary_answer=1),
        record("q1", True, True, contrary_answer=0),
        record("q2", False, True, any_gold=1, wrong_answer=0),
        record("q3", False, False, any_gold=0, wrong_answer=1),   # free-form: the wrong answer
        record("q4", False, None),                                # no answer: left out
        {"id": "q5", "error": "RuntimeError: boom", "correct": None, "parse_status": "error",
         "metrics": {}},                                          # failed: left out
        {"id": "q6", "correct": False, "parse_status": "failed",  # unparsable answer: wrong
         "metrics": {"contrary@1": 0.0}}])
    assert rerank_answers.split(str(run)) == {
        "contrary first": {"n": 2, "right": 1, "contrary": 1},
        "other first": {"n": 3, "right": 1, "contrary": 1}}


def test_the_table_and_a_missing_run(tmp_path, write_run, capsys):
    run = write_run(tmp_path / "listwise", {"dataset": "toy", "kind": "rank", "method": "vanilla"},
                    [record("q0", False, True, contrary_answer=0)])
    rerank_answers.main([str(run)])
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "| listwise | contrary first | 0 | – | – |"
    assert out[3].startswith("| listwise | other first | 1 | 1 (100.0 % [") and out[3].endswith(
        "| 0 (0.0 % [0.0, 79.3]) |")
    with pytest.raises(SystemExit):
        rerank_answers.main([str(tmp_path / "absent")])
    assert "no results.jsonl" in capsys.readouterr().err

import pytest
import rerank_answers

MANIFEST = {"dataset": "toyrank", "kind": "rank", "method": "vanilla", "answer_top": 2}
ITEMS = [{"id": f"q{i}", "query": "Q?", "passages": [
    {"pid": "c", "text": "C.", "relevance": 0, "is_contrary": True},
    {"pid": "r", "text": "R.", "relevance": 2, "is_contrary": False},
    {"pid": "x", "text": "X.", "relevance": 0, "is_contrary": False}]} for i in range(7)]


def record(qid, ranking, correct, **answer_metrics):
    return {"id": qid, "ranking": ranking, "correct": correct, "parse_status": "ok",
            "metrics": answer_metrics}


@pytest.fixture
def data(tmp_path, write_data_dir):
    return str(write_data_dir(tmp_path / "data", "toyrank", ITEMS))


def test_answers_are_grouped_by_where_the_contrary_passage_stands_in_the_top_k(
        tmp_path, write_run, data):
    run = write_run(tmp_path / "none", MANIFEST, [
        record("q0", ["c", "r", "x"], False, contrary_answer=1),
        record("q1", ["r", "c", "x"], True, contrary_answer=0),
        record("q2", ["r", "x", "c"], True, any_gold=1, wrong_answer=0),  # c below the top 2
        record("q3", ["r", "x"], False, any_gold=0, wrong_answer=1),  # c removed; free-form
        record("q4", ["c", "r", "x"], None),  # no answer: left out
        {"id": "q5", "error": "RuntimeError: boom", "correct": None, "parse_status": "error",
         "metrics": {}},  # failed: left out
        {"id": "q6", "ranking": ["r", "c"], "correct": None, "parse_status": "failed",
         "metrics": {}}])  # unparsable answer: counted wrong
    assert rerank_answers.split(str(run), data) == (2, {
        "contrary first": {"n": 1, "right": 0, "contrary": 1},
        "contrary in the top k, not first": {"n": 2, "right": 1, "contrary": 0},
        "no contrary in the top k": {"n": 2, "right": 1, "contrary": 1}})


def test_the_table_and_runs_it_refuses(tmp_path, write_run, data, capsys):
    run = write_run(tmp_path / "listwise", MANIFEST,
                    [record("q0", ["r", "x", "c"], True, contrary_answer=0)])
    rerank_answers.main([str(run), "--data-dir", data])
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "| listwise | 2 | contrary first | 0 | – | – |"
    assert out[4].startswith("| listwise | 2 | no contrary in the top k | 1 | 1 (100.0 % [")
    assert out[4].endswith("| 0 (0.0 % [0.0, 79.3]) |")
    with pytest.raises(SystemExit):
        rerank_answers.main([str(tmp_path / "absent")])
    assert "no results.jsonl" in capsys.readouterr().err
    unanswered = write_run(tmp_path / "ranking-only", {**MANIFEST, "answer_top": None}, [])
    with pytest.raises(SystemExit, match="did not answer"):
        rerank_answers.main([str(unanswered), "--data-dir", data])

import crossval_removals
import pytest


def passage(pid, role):
    return {"pid": pid, "text": f"Passage {pid}.", "relevance": 2 if role == "correct" else 0,
            "is_contrary": role == "misinfo", "role": role}


def validate(a, b, status, false=None, answers=None):
    outputs = {"A": a, "B": b, "status": status}
    if answers:
        outputs["answers"] = answers
    if false:
        outputs.update(false=false, kept=b if false == a else a)
    return {"name": "crossval.validate", "decision": "", "outputs": outputs}


@pytest.fixture
def toy(tmp_path, write_run, write_data_dir):
    """Two items, each: c1, c2 (two valid readings), m (misinformation), n (noise). The run
    judged five pairs of the first; the second failed, and its steps must not count.
    Returns the run folder and the data folder."""
    items = [{"id": f"toy::{i}", "query": "Who?", "passages": [
        passage("c1", "correct"), passage("c2", "correct"), passage("m", "misinfo"),
        passage("n", "noise")]} for i in range(2)]
    steps = [{"name": "crossval.detect", "decision": "", "outputs": {}},
             validate("m", "c1", "ok", false="m"), validate("c1", "c2", "ok", false="c2"),
             validate("c1", "n", "tied"), validate("c2", "n", "none", answers=[None, None]),
             validate("c2", "m", "ambiguous")]
    records = [{"id": "toy::0", "ranking": ["c1", "n"], "rerank_steps": steps},
               {"id": "toy::1", "error": "RuntimeError: boom",
                "rerank_steps": [validate("m", "c1", "ok", false="c1")]}]
    run = write_run(tmp_path / "run", {"dataset": "toyrank", "kind": "rank",
                                       "method": "crossval", "model": "fake"}, records)
    return run, write_data_dir(tmp_path / "data", "toyrank", items)


def test_each_judged_pair_is_classed_by_roles_and_outcome(toy):
    run, data = toy
    rows = crossval_removals.judged_pairs(*crossval_removals.run_items(str(run), str(data)))
    assert [(row["roles"], row["outcome"]) for row in rows] == [
        (("correct", "misinfo"), "removed the contrary side"),
        (("correct", "correct"), "removed a non-contrary side"),
        (("correct", "noise"), "tied"),
        (("correct", "noise"), "no two answers"),
        (("correct", "misinfo"), "two subjects")]
    assert (rows[0]["removed"], rows[0]["kept"]) == ("misinfo", "correct")
    assert (rows[1]["removed"], rows[1]["kept"]) == ("correct", "correct")
    assert "removed" not in rows[2]
    assert rows[3]["no_answer_reason"] == "neither side answers"
    assert all("no_answer_reason" not in row for row in rows[:3] + rows[4:])


@pytest.mark.parametrize("answers, reason", [
    ([None, None], "neither side answers"), (["Paris", None], "one side answers"),
    ([None, "Paris"], "one side answers"), (["Paris", "paris"], "same answer")])
def test_why_a_support_verdict_found_no_two_answers(answers, reason):
    assert crossval_removals.no_answer_reason(answers) == reason


def test_the_tables(toy, capsys, monkeypatch):
    run, data = toy
    monkeypatch.setattr("sys.argv", ["crossval_removals.py", str(run), "--data-dir", str(data)])
    crossval_removals.main()
    out = capsys.readouterr().out
    assert "5 pairs judged in 1 queries" in out
    # columns: the statuses that occur, then the two kinds of removal
    assert "| pairs | no two answers | tied | two subjects | removed the contrary side |" in out
    assert "| correct – noise | 2 | 1 | 1 | 0 | 0 | 0 |" in out
    assert "| all | 5 | 1 | 1 | 1 | 1 | 1 |" in out
    assert "| misinfo | correct | 1 |" in out
    assert "| correct – noise | 1 | 1 | 0 | 0 |" in out  # the pairs with no two answers, by why


def test_the_guard_is_replayed_on_removed_pairs_only_and_resumes(tmp_path, toy, capsys):
    from faithrag.config import Config

    run, data = toy
    records, items = crossval_removals.run_items(str(run), str(data))
    rows = crossval_removals.judged_pairs(records, items)
    out = tmp_path / "guard.jsonl"
    config = Config.load(None, {"llm.backend": "fake"})
    scored = crossval_removals.replay_guard(rows, items, out, config)
    assert [(r["pair"], r["kind"]) for r in scored] == [
        (["m", "c1"], "contrary removed"), (["c1", "c2"], "one of two valid readings removed")]
    assert len(out.read_text().splitlines()) == 2
    out.write_text(out.read_text().replace('"log_odds": ' + str(scored[0]["log_odds"]),
                                           '"log_odds": -0.7', 1))
    again = crossval_removals.replay_guard(rows, items, out, config)
    assert again[0]["log_odds"] == -0.7  # read back, not scored again
    crossval_removals.print_guard(again)
    table = capsys.readouterr().out
    assert "| -0.5 | 1 / 1 (100 % " in table  # the contrary pair at -0.7 is left standing
    assert table.splitlines()[-2].endswith("| 1 | 0 (0 %) |")  # at -0.5 only the wrong one stands

"""Constrained decoding: the speed measurement's replies and records, the runs on and off, and
their table."""

import json
from pathlib import Path

import bench_constrained
import pytest

from faithrag.eval.report import find_run_dirs, load_run
from faithrag.methods.schemas import choice_answer_schema

SCHEMA = choice_answer_schema(["1889", "1925"], max_tokens=32)


def test_a_reply_parses_only_as_an_object_with_a_bounded_reason_and_an_option():
    assert bench_constrained.parses('{"Reason": "r", "Answer": "1889"}', SCHEMA)
    assert not bench_constrained.parses('{"Reason": "r", "Answer": "1890"}', SCHEMA)
    assert not bench_constrained.parses('{"Reason": "' + "r" * 200 + '", "Answer": "1889"}',
                                        SCHEMA)
    assert not bench_constrained.parses('{"Answer": "1889"}', SCHEMA)
    assert not bench_constrained.parses('Answer: 1889', SCHEMA)


@pytest.mark.model
def test_both_sides_of_each_item_are_recorded_interleaved(tiny_gguf, tmp_path, write_data_dir,
                                                          capsys):
    items = [{"id": f"q{i}", "question": "When was the Eiffel Tower completed?",
              "context": "The Eiffel Tower was completed in 1889.", "answer": "1889",
              "choices": ["1889", "1925"], "answer_idx": 0} for i in range(2)]
    root = write_data_dir(tmp_path / "data", "toy", items)
    out = tmp_path / "speed.jsonl"
    assert bench_constrained.main(["--model", "tiny", "--threads", "1", "--dataset", "toy",
                                   "--data-root", str(root), "--limit", "2",
                                   "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert "settings" in lines[0] and "summary" in lines[-1]
    assert [(r["item"], r["side"]) for r in lines[1:-1]] == [
        ("q0", "grammar"), ("q0", "plain"), ("q1", "plain"), ("q1", "grammar")]
    assert all(r["schema_valid"] for r in lines[1:-1] if r["side"] == "grammar")
    assert lines[-1]["summary"]["schema_valid"]["grammar"] == 2
    assert "median ratio" in capsys.readouterr().out


def test_without_a_sub_command_the_speed_is_measured_with_its_own_options(monkeypatch):
    seen = []
    monkeypatch.setattr(bench_constrained, "speed", lambda args: seen.append(vars(args)) or 0)
    assert bench_constrained.main(["--limit", "3"]) == 0
    assert seen == [{"model": "default", "threads": 2, "dataset": "faitheval_counterfactual",
                     "data_root": None, "limit": 3,
                     "out": Path("results/constrained/speed.jsonl")}]


def test_run_gives_each_part_both_sides_with_their_own_limits(tmp_path, fake_executable):
    faithrag, calls = fake_executable()
    out = str(tmp_path / "constrained")
    bench_constrained.main(["run", "crossval", "verifier", "answers", "--sets", "s",
                            "--verdicts", "support", "--limit", "20", "--off-limit", "10",
                            "--rank-limit", "8", "--rank-off-limit", "4", "--verify-limit", "6",
                            "--out", out, "--faithrag", faithrag])
    common = ["--model", "default", "--threads", "1", "--no-progress"]
    on, off = ["--set", "llm.constrain=true"], ["--set", "llm.constrain=false"]

    def crossval(limit, side, constrain):
        return ["eval", "--plain", "--dataset", "ramdocs_rank", "--rerank", "crossval", "--set",
                "rerank.verdict=support", "--set", "llm.prefix_cache=true", "--method",
                "vanilla", "--answer-top", "3", "--answer-cache", f"{out}/answer-cache",
                "--limit", limit, *common, *constrain, "--out",
                f"{out}/ramdocs_rank-crossval-support-{side}"]

    def verifier(side, constrain):
        return ["hostile", "run", "--plain", "--setting", "poisonedrag", "--retrieval", "hostile",
                "--verify", "antisyco", "--limit", "6", *common, *constrain, "--out",
                f"{out}/poisonedrag-hostile-antisyco-{side}"]

    def answers(method, limit, side, constrain):
        extra = ["--set", "csrag.enhance_context=false"] if method == "csrag" else []
        return ["eval", "--plain", "--dataset", "s", "--method", method, *extra, "--limit", limit,
                *common, *constrain, "--out", f"{out}/s-{method}-{side}"]

    assert calls() == [crossval("8", "on", on), crossval("4", "off", off),
                       verifier("on", on), verifier("off", off),
                       answers("cot_json", "20", "on", on), answers("csrag", "20", "on", on),
                       answers("cot_json", "10", "off", off), answers("csrag", "10", "off", off)]
    timings = (tmp_path / "constrained" / "timings.txt").read_text().splitlines()
    assert timings[0].startswith("ramdocs_rank-crossval-support-on ")
    assert timings[-1].startswith("s-csrag-off ")
    with pytest.raises(SystemExit):
        bench_constrained.main(["run", "nothing"])


def test_all_is_answers_verifier_crossval_and_a_side_can_run_alone(tmp_path, fake_executable):
    faithrag, calls = fake_executable()
    bench_constrained.main(["run", "--sides", "off", "--sets", "s", "--verdicts", "pairwise",
                            "--out", str(tmp_path), "--faithrag", faithrag])
    assert [Path(c[-1]).name for c in calls()] == [
        "s-cot_json-off", "s-csrag-off", "poisonedrag-hostile-antisyco-off",
        "ramdocs_rank-crossval-pairwise-off"]
    assert calls()[0][calls()[0].index("--limit") + 1] == "200"


def manifest(method: str, constrain: bool | None, dataset: str = "set", **extra) -> dict:
    llm = {} if constrain is None else {"constrain": constrain}
    config = {"llm": llm, "generation": {"max_tokens": 256}, "rerank": {"verdict": "support"}}
    return {"dataset": dataset, "method": method, "config": config, **extra}


def answer_record(i: int, ok: bool, status: str = "ok", completion: int = 90,
                  warnings: tuple[str, ...] = ()) -> dict:
    generate = {"stage": "generate", "llm_calls": 1, "completion_tokens": completion}
    return {"id": f"t::{i}", "correct": ok, "parse_status": status,
            "trace": {"stages": [generate]}, "extra": {"warnings": list(warnings)}}


def runs(folder: Path):
    return [load_run(d) for d in find_run_dirs([folder])]


def test_unreadable_answers_cut_replies_and_fact_lists_are_counted_per_side(tmp_path, write_run):
    write_run(tmp_path / "csrag-off", manifest("csrag", False), [
        answer_record(0, False, "failed", completion=256),
        answer_record(1, True, warnings=("no fact list in the output: nothing is suppressed",)),
        answer_record(2, True)])
    write_run(tmp_path / "csrag-on", manifest("csrag", True), [
        answer_record(0, True, completion=286),  # ran past max_tokens to close: read, not cut
        answer_record(1, True), answer_record(2, True),
        answer_record(3, True)])  # not in the other side: left out of the row

    row = bench_constrained.table(runs(tmp_path)).splitlines()[2]
    assert row.startswith("| csrag | set | 3 | 1 / 3 (1 items); 1 cut at the cap, fact lists "
                          "unreadable 1 | 0 / 3 (0 items); 0 cut at the cap |")
    assert "+33.3" in row and "(1 / 0, p 1.00), n 3" in row


def test_crossval_counts_parse_failures_and_unreadable_side_answers(tmp_path, write_run):
    def record(i, failed, side_decision):
        steps = [{"name": "crossval.validate", "decision": side_decision,
                  "outputs": {"answers": [None, "x"]}}]
        return {"id": f"t::{i}", "correct": True, "parse_status": "ok",
                "rerank_parse": {"outputs": 3, "failed": failed}, "rerank_steps": steps,
                "trace": {"stages": []}}
    for side, failed, decision in (("off", 1, "unreadable side answer: nothing removed"),
                                   ("on", 0, "removed t::1#d2 (kept t::1#d0)")):
        write_run(tmp_path / side, manifest("crossval", side == "on", rerank="crossval"),
                  [record(0, failed, decision), record(1, 0, "no real conflict")])

    row = bench_constrained.table(runs(tmp_path)).splitlines()[2]
    # each item: 3 parsed replies and 2 side answers
    assert row.startswith("| crossval, support verdict | set | 2 | 2 / 10 (1 items) "
                          "| 0 / 10 (0 items) |")


def test_verifier_counts_unreadable_judgements_and_attack_success(tmp_path, write_run):
    def record(i, unparsable, attack):
        verify = {"stage": "verify", "llm_calls": 2, "completion_tokens": 5}
        return {"id": f"t::{i}", "correct": not attack, "parse_status": "ok",
                "metrics": {"attack_success": int(attack)},
                "trace": {"stages": [verify]}, "extra": {"unparsable": unparsable}}
    write_run(tmp_path / "off", manifest("vanilla", False, verify="antisyco"),
              [record(0, 2, True), record(1, 0, False)])
    write_run(tmp_path / "on", manifest("vanilla", True, verify="antisyco"),
              [record(0, 0, False), record(1, 0, False)])

    row = bench_constrained.table(runs(tmp_path)).splitlines()[2]
    assert "| 2 / 4 (1 items); attack success 50.0" in row
    assert "| 0 / 4 (0 items); attack success 0.0" in row


def test_a_constrained_run_longer_than_its_other_side_is_also_scored_on_all_its_items(
        tmp_path, write_run):
    write_run(tmp_path / "cot-off", manifest("cot_json", False),
              [answer_record(0, False, "failed")])
    write_run(tmp_path / "cot-on", manifest("cot_json", True),
              [answer_record(0, True), answer_record(1, False), answer_record(2, True)])
    lines = bench_constrained.table(runs(tmp_path)).splitlines()
    assert lines[2].startswith("| cot_json | set | 1 |")
    assert lines[4].startswith("| stage, constrained on all its items |")
    assert lines[6] == ("| cot_json | set | 3 | 0 / 3 (0 items); 0 cut at the cap "
                        "| 66.7 [21, 94] |")
    # both sides on the same items: no such row
    write_run(tmp_path / "same" / "cot-off", manifest("cot_json", False),
              [answer_record(i, True) for i in range(3)])
    (tmp_path / "cot-on").rename(tmp_path / "same" / "cot-on")
    assert "all its items" not in bench_constrained.table(runs(tmp_path / "same"))


def test_a_run_without_the_switch_is_unconstrained_and_one_side_alone_gets_a_row(
        tmp_path, write_run):
    write_run(tmp_path / "old", manifest("cot_json", None), [answer_record(0, True)])
    [row] = bench_constrained.table(runs(tmp_path)).splitlines()[2:]
    assert row.startswith("| cot_json | set | 1 | 0 / 1 (0 items); 0 cut at the cap | — |")


def test_the_goal_compares_csrag_with_cot_json_both_constrained(tmp_path, write_run):
    write_run(tmp_path / "cot", manifest("cot_json", True),
              [answer_record(i, i < 3) for i in range(4)])
    write_run(tmp_path / "csrag", manifest("csrag", True),
              [answer_record(i, i < 2) for i in range(4)])

    goal = bench_constrained.table(runs(tmp_path)).splitlines()[-1]
    assert goal.startswith("| set | 75.0 [30, 95] | 50.0 [15, 85] | -25.0")
    assert "(0 / 1, p 1.00), n 4" in goal


def test_the_table_sub_command_prints_the_table_of_the_runs_found(tmp_path, write_run, capsys):
    write_run(tmp_path / "cot-on", manifest("cot_json", True), [answer_record(0, True)])
    write_run(tmp_path / "cot-off", manifest("cot_json", False), [answer_record(0, False)])
    assert bench_constrained.main(["table", str(tmp_path)]) == 0
    assert capsys.readouterr().out == bench_constrained.table(runs(tmp_path)) + "\n"


def test_two_runs_of_one_stage_and_side_are_refused(tmp_path, write_run):
    for name in ("a", "b"):
        write_run(tmp_path / name, manifest("cot_json", True), [answer_record(0, True)])
    with pytest.raises(SystemExit, match="two constrained runs of cot_json on set"):
        bench_constrained.table(runs(tmp_path))

from pathlib import Path

import cfrag
import pytest


def record(correct, answers, counterfactuals=("q'",), prediction=None, pool=("p1", "p2")):
    return {"correct": correct, "prediction": prediction or answers[0], "extra": {"cfrag": {
        "counterfactuals": list(counterfactuals), "pool": list(pool),
        "hypotheses": [{"answer": a} for a in answers],
        "decision": "consensus" if len(set(answers)) == 1 else "synthesis"}}}


def test_outcomes_are_split_by_whether_the_drafts_were_the_same():
    a = {"same": record(True, ["x", "x"]), "other": record(False, ["x", "y"]),
         "kept": record(True, ["z", "z"])}
    b = {"same": record(False, ["x", "x"], prediction="w"),
         "other": record(True, ["y", "y"], counterfactuals=("q''",)),
         "kept": record(True, ["z", "z"])}
    cells = cfrag.row(["same", "other", "kept"], a, b)
    # items, counterfactuals, pool, drafts, decision, final answer the same
    assert cells[:6] == ["3", "2", "3", "2", "2", "1"]
    assert cells[6] == "1 / 0 (of 2)"  # same drafts: right in A only once
    assert cells[7] == "0 / 1 (of 1)"  # different drafts: right in B only once


def test_outcomes_can_be_split_by_the_pool_when_the_variant_changes_the_drafts():
    a = {"same_pool": record(False, ["x", "y"]), "other_pool": record(True, ["z", "z"])}
    b = {"same_pool": record(True, ["y"]), "other_pool": record(False, ["w"], pool=("p3",))}
    cells = cfrag.row(["same_pool", "other_pool"], a, b, split="pool")
    assert cells[2] == "1"  # pool the same on one item
    assert cells[6] == "0 / 1 (of 1)"  # same pool: right in B only
    assert cells[7] == "1 / 0 (of 1)"  # other pool: right in A only
    assert cfrag.columns("pool")[-2] == "same pool: A only / B only"


def test_the_table_follows_the_datasets_item_order(tmp_path, capsys, write_run, write_data_dir):
    data = write_data_dir(tmp_path / "data", "set", [
        {"id": i, "question": "Q?", "context": "C.", "answer": "x"} for i in ("q0", "q1", "q2")])
    a = {"q2": record(True, ["x"]), "q0": record(True, ["x"]), "q1": record(False, ["y"])}
    b = {"q0": record(False, ["x"], prediction="w"), "q1": record(True, ["x"]),
         "q2": record(True, ["x"])}
    runs = [write_run(tmp_path / name, {"dataset": "set", "method": "cfrag"},
                      [{"id": i, **r} for i, r in records.items()])
            for name, records in (("a", a), ("b", b))]
    cfrag.main(["agreement", str(runs[0]), str(runs[1]), "0:1", "1:3", "--data-dir",
                str(data)])
    rows = capsys.readouterr().out.splitlines()[-2:]
    assert rows[0] == "| 1–1 | 1 | 1 | 1 | 1 | 1 | 0 | 1 / 0 (of 1) | 0 / 0 (of 0) |"
    assert rows[1] == "| 2–3 | 2 | 2 | 2 | 1 | 2 | 1 | 0 / 0 (of 1) | 0 / 1 (of 1) |"


def test_runs_on_different_datasets_are_refused(tmp_path, write_run):
    runs = [write_run(tmp_path / name, {"dataset": name, "method": "cfrag"}, [])
            for name in ("one", "other")]
    with pytest.raises(SystemExit) as refused:
        cfrag.main(["agreement", str(runs[0]), str(runs[1]), "0:1"])
    assert refused.value.code == 2


def test_run_sweeps_the_levels_ablates_reports_and_measures_speed(tmp_path, fake_executable,
                                                                   capsys):
    faithrag, calls = fake_executable()
    python, python_calls = fake_executable("python")
    out = str(tmp_path / "cfrag")
    cfrag.main(["run", "--sets", "s", "t", "--levels", "0", "4", "--ablation-level", "4",
                "--ablations", "cfrag_no_causal", "--scorer", "bi_encoder", "--limit", "3",
                "--out", out, "--faithrag", faithrag, "--python", python])
    assert (tmp_path / "cfrag" / "configs" / "cfrag_no_causal.toml").read_text() == (
        '[cfrag]\nscorer = "bi_encoder"\ncausal_scoring = false\n')
    assert (tmp_path / "cfrag" / "configs" / "cfrag.toml").read_text() == (
        '[cfrag]\nscorer = "bi_encoder"\n')
    evals = [c for c in calls() if c[0] == "eval"]
    assert [c[c.index("--out") + 1][len(out):] for c in evals] == [
        "/main/s-vanilla-d0", "/main/s-cfrag-d0", "/main/s-vanilla-d4", "/main/s-cfrag-d4",
        "/ablations/s-cfrag_no_causal-d4", "/main/t-vanilla-d0", "/main/t-cfrag-d0",
        "/main/t-vanilla-d4", "/main/t-cfrag-d4", "/ablations/t-cfrag_no_causal-d4"]
    assert evals[1] == ["eval", "--plain", "--dataset", "s", "--method", "cfrag", "--limit", "3",
                        "--model", "default", "--threads", "1", "--workers", "2", "--context",
                        "item_retrieval", "--distractors", "0", "--metric", "smart_em", "--out",
                        f"{out}/main/s-cfrag-d0", "--no-progress", "--config",
                        f"{out}/configs/cfrag.toml"]
    assert "--config" not in evals[0]
    reports = [c for c in calls() if c[0] == "report"]
    assert reports == [["report", f"{out}/main", "--out", f"{out}/main/report"],
                       ["report", f"{out}/main/s-vanilla-d4", f"{out}/main/s-cfrag-d4",
                        f"{out}/main/t-vanilla-d4", f"{out}/main/t-cfrag-d4", f"{out}/ablations",
                        "--compare", "--out", f"{out}/ablations/report"]]
    benches = [c for c in calls() if c[0] == "bench"]
    assert [c[c.index("--json") + 1] for c in benches] == [
        f"{out}/speed/{name}-{label}.json" for name in "st" for label in ("vanilla", "cfrag")]
    speed = tmp_path / "cfrag" / "speed" / "s-cfrag.txt"
    assert speed.read_text() == "output of bench --dataset\n"  # printed and kept
    [batching] = python_calls()
    assert Path(batching[0]).name == "bench_prompt_sharing.py"
    assert batching[1:] == ["cfrag-batching", "--dataset", "s", "--items", "2", "--model",
                            "default", "--threads", "1", "--distractors", "4", "--json",
                            f"{out}/speed/batching.json"]
    assert "s cfrag distractors=4 " in capsys.readouterr().out

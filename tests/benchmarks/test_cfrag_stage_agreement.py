import cfrag_stage_agreement as stage_agreement


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
    cells = stage_agreement.row(["same", "other", "kept"], a, b)
    # items, counterfactuals, pool, drafts, decision, final answer the same
    assert cells[:6] == ["3", "2", "3", "2", "2", "1"]
    assert cells[6] == "1 / 0 (of 2)"  # same drafts: right in A only once
    assert cells[7] == "0 / 1 (of 1)"  # different drafts: right in B only once


def test_outcomes_can_be_split_by_the_pool_when_the_variant_changes_the_drafts():
    a = {"same_pool": record(False, ["x", "y"]), "other_pool": record(True, ["z", "z"])}
    b = {"same_pool": record(True, ["y"]), "other_pool": record(False, ["w"], pool=("p3",))}
    cells = stage_agreement.row(["same_pool", "other_pool"], a, b, split="pool")
    assert cells[2] == "1"  # pool the same on one item
    assert cells[6] == "0 / 1 (of 1)"  # same pool: right in B only
    assert cells[7] == "1 / 0 (of 1)"  # other pool: right in A only
    assert stage_agreement.columns("pool")[-2] == "same pool: A only / B only"


def test_the_table_follows_the_datasets_item_order(tmp_path, capsys, write_run, write_data_dir):
    data = write_data_dir(tmp_path / "data", "set", [
        {"id": i, "question": "Q?", "context": "C.", "answer": "x"} for i in ("q0", "q1", "q2")])
    a = {"q2": record(True, ["x"]), "q0": record(True, ["x"]), "q1": record(False, ["y"])}
    b = {"q0": record(False, ["x"], prediction="w"), "q1": record(True, ["x"]),
         "q2": record(True, ["x"])}
    runs = [write_run(tmp_path / name, {"dataset": "set", "method": "cfrag"},
                      [{"id": i, **r} for i, r in records.items()])
            for name, records in (("a", a), ("b", b))]
    stage_agreement.main([str(runs[0]), str(runs[1]), "0:1", "1:3", "--data-dir", str(data)])
    rows = capsys.readouterr().out.splitlines()[-2:]
    assert rows[0] == "| 1–1 | 1 | 1 | 1 | 1 | 1 | 0 | 1 / 0 (of 1) | 0 / 0 (of 0) |"
    assert rows[1] == "| 2–3 | 2 | 2 | 2 | 1 | 2 | 1 | 0 / 0 (of 1) | 0 / 1 (of 1) |"

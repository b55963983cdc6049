import pytest
import rerank_paired

PASSAGES = [{"pid": "c", "text": "C.", "relevance": 0, "is_contrary": True},
            {"pid": "r", "text": "R.", "relevance": 2, "is_contrary": False},
            {"pid": "x", "text": "X.", "relevance": 0, "is_contrary": False}]


def queries(ids):
    """Ranking items: per query c (contrary), r (relevance 2), x (irrelevant)."""
    return [{"id": qid, "query": "Q?", "passages": PASSAGES} for qid in ids]


@pytest.fixture
def write_ranked(write_run):
    def write(path, dataset, rows):
        """rows: (id, ndcg@1, contrary@1, correct); ndcg None = undefined, "error" = failed."""
        records = []
        for qid, ndcg, contrary, correct in rows:
            if ndcg == "error":
                records.append({"id": qid, "error": "RuntimeError: boom", "metrics": {},
                                "correct": None, "parse_status": "error"})
                continue
            records.append({"id": qid, "ranking": ["r"], "correct": correct, "parse_status": "ok",
                            "metrics": {"ndcg@1": ndcg, "contrary@1": contrary}})
        return str(write_run(path, {"dataset": dataset, "kind": "rank", "method": path.name,
                                    "model": "fake"}, records))
    return write


def test_pairs_only_the_queries_both_runs_have_and_picks_the_best_baseline(tmp_path,
                                                                          write_ranked):
    reranker = write_ranked(tmp_path / "crossval", "toy", [
        ("q0", 1.0, 0.0, True), ("q1", 1.0, 0.0, True), ("q2", 0.0, 1.0, False),
        ("q3", None, 0.0, True), ("q4", "error", None, None)])
    weak = write_ranked(tmp_path / "none", "toy", [
        ("q0", 0.0, 1.0, False), ("q1", 0.0, 1.0, True), ("q2", 0.0, 1.0, False),
        ("q3", None, 1.0, False), ("q4", 1.0, 0.0, True), ("q5", 1.0, 0.0, True)])
    strong = write_ranked(tmp_path / "bi_encoder", "toy", [
        ("q0", 1.0, 0.0, None), ("q1", 1.0, 0.0, None)])
    _, _, a = rerank_paired.queries(reranker)
    _, _, b = rerank_paired.queries(weak)
    assert set(a) == {"q0", "q1", "q2", "q3"}  # the errored query is left out

    c = rerank_paired.compare(a, b)
    assert c["shared"] == 4 and c["ndcg_n"] == 3  # q3 has no nDCG@1
    assert c["ndcg_a"] == pytest.approx(2 / 3) and c["ndcg_b"] == 0.0
    assert c["ndcg_difference"] == pytest.approx(2 / 3)
    assert (c["contrary"]["only_a"], c["contrary"]["only_b"], c["contrary"]["n"]) == (0, 3, 4)
    assert (c["answers"]["only_a"], c["answers"]["only_b"]) == (2, 0)
    assert (c["same_order"], c["same_first"]) == (4, 4)  # every toy ranking is ["r"]

    _, _, s = rerank_paired.queries(strong)
    assert "answers" not in rerank_paired.compare(a, s)  # the baseline did not answer
    g = rerank_paired.goals(a, {"none": c, "bi_encoder": rerank_paired.compare(a, s)})
    assert g["best"] == "bi_encoder" and g["margin"] == 0.0  # 1.0 vs 1.0 on q0, q1
    assert g["contrary"] == pytest.approx(1 / 4) and g["contrary_n"] == 4


def test_the_table_and_the_goal_lines(tmp_path, capsys, monkeypatch, write_data_dir,
                                     write_ranked):
    write_data_dir(tmp_path / "data", "toy", queries(["q0"]))
    reranker = write_ranked(tmp_path / "crossval", "toy", [("q0", 1.0, 0.0, True)])
    baseline = write_ranked(tmp_path / "none", "toy", [("q0", 0.5, 1.0, False)])
    monkeypatch.setattr("sys.argv", ["rerank_paired.py", reranker, baseline,
                                     "--data-dir", str(tmp_path / "data")])
    rerank_paired.main()
    out = capsys.readouterr().out
    assert "| none | 1 | 1.000 | 0.500 | +0.500" in out
    assert out.split("\n")[4].endswith("| 1 / 1 |")  # same order / same first
    assert "contrary@1 <= 5%: 0.0 %" in out and "met by the point estimate" in out
    assert "nDCG@1 >= best baseline + 0.10: +0.500 [+0.500, +0.500] over none" in out


def test_runs_on_different_sets_are_refused(tmp_path, monkeypatch, write_ranked):
    reranker = write_ranked(tmp_path / "crossval", "toy", [("q0", 1.0, 0.0, True)])
    other = write_ranked(tmp_path / "none", "other", [("q0", 1.0, 0.0, True)])
    monkeypatch.setattr("sys.argv", ["rerank_paired.py", reranker, other])
    with pytest.raises(SystemExit):
        rerank_paired.main()


def query(ranking, removed=()):
    """A ranked query over c, r, x (see queries) with the given order and removed ids."""
    ndcg = 1.0 if ranking[0] == "r" else 0.0
    return rerank_paired.Query(ndcg, ranking[0] == "c", None, ranking, list(removed))


def test_counts_the_queries_where_the_reranker_kept_the_baselines_order():
    baseline = {"q0": query(["c", "r", "x"]), "q1": query(["x", "r", "c"]),
                "q2": query(["r", "x", "c"])}
    reranker = {"q0": query(["c", "x", "r"]), "q1": query(["x", "r", "c"]),
                "q2": query(["x", "r"], ["c"])}
    c = rerank_paired.compare(reranker, baseline)
    assert (c["same_order"], c["same_first"]) == (1, 2)  # q1 whole, q0 and q1 in first place


def test_a_gain_is_split_into_removals_and_ordering(tmp_path, write_data_dir):
    write_data_dir(tmp_path / "data", "toy", queries(["q0", "q1"]))
    items = {item.id: item for item in rerank_paired.load_dataset(
        "toy", str(tmp_path / "data")).items}

    baseline = {"q0": query(["c", "r", "x"]), "q1": query(["x", "r", "c"])}
    # q0: removing c lifts r to the top; q1: nothing removed, but A ranks r first itself
    reranker = {"q0": query(["r", "x"], ["c"]), "q1": query(["r", "x", "c"])}
    split = rerank_paired.removal_split(reranker, baseline, items)
    assert split == {"n": 2, "b": 0.0, "pruned": 0.5, "a": 1.0,
                     "b_contrary": 0.5, "pruned_contrary": 0.0, "a_contrary": 0.0}
    assert rerank_paired.removal_split(baseline, reranker, items) is None  # removed nothing

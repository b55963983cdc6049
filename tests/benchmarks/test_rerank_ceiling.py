import pytest
import rerank_ceiling


def passage(pid, relevance, contrary=False):
    return {"pid": pid, "text": f"Passage {pid}.", "relevance": relevance, "is_contrary": contrary}


@pytest.fixture
def write_toy(tmp_path, write_run, write_data_dir):
    def write(rankings):
        """Three items, each: c (contrary), r (relevance 2), s (relevance 1), x (irrelevant)."""
        items = [{"id": f"toy::{i}", "query": f"Question {i}?",
                  "passages": [passage("c", 0, True), passage("r", 2), passage("s", 1),
                               passage("x", 0)]} for i in range(len(rankings))]
        run = write_run(tmp_path / "run", {"dataset": "toyrank", "kind": "rank",
                                           "method": "none", "model": "fake"},
                        [{"id": f"toy::{i}", "ranking": ranking, "correct": None}
                         for i, ranking in enumerate(rankings)])
        return run, write_data_dir(tmp_path / "data", "toyrank", items)
    return write


def test_removing_the_contrary_passage_lifts_only_the_items_it_led(write_toy):
    # contrary first then the best; contrary first then the second best; already the best first
    run, data = write_toy([["c", "r", "s", "x"], ["c", "s", "r", "x"], ["r", "c", "s", "x"]])
    c = rerank_ceiling.ceiling(str(run), str(data))
    assert c["n"] == 3 and c["contrary@1"] == pytest.approx(2 / 3)
    assert c["ndcg@1"] == pytest.approx(1 / 3)  # 0, 0, 1
    second = (2**1 - 1) / (2**2 - 1)  # nDCG@1 of the relevance-1 passage first
    assert c["ndcg@1_without_contrary"] == pytest.approx((1 + second + 1) / 3)
    assert c["gain"] == pytest.approx((1 + second) / 3)


def test_the_table_has_a_row_per_run(capsys, monkeypatch, write_toy):
    run, data = write_toy([["r", "c", "s", "x"]])
    monkeypatch.setattr("sys.argv", ["rerank_ceiling.py", str(run), "--data-dir", str(data)])
    rerank_ceiling.main()
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[2].endswith("| 1.000 [1.000, 1.000] | +0.000 |")

import json

import bench_llm
import pytest


def row(plain, lookup, drafted, accepted, passes, same):
    return {"plain": {"seconds": plain, "stages": {"generate": plain}, "answer": "a"},
            "lookup": {"seconds": lookup, "stages": {"generate": lookup}, "answer": "a"},
            "draft": {"drafted": drafted, "accepted": accepted, "passes": passes},
            "identical_completions": same}


def test_lookup_summary_gives_median_ratios_and_acceptance():
    summary = bench_llm.summarise([row(10, 5, 10, 8, 4, [True]), row(10, 10, 10, 2, 4, [False]),
                                   row(10, 20, 0, 0, 0, [True, True])])
    assert summary["n"] == 3 and summary["median_time_ratio"] == 1.0
    assert summary["median_stage_ratio"] == {"generate": 1.0}
    assert summary["acceptance"] == 0.5 and summary["identical_completions"] == "3/4"
    assert summary["identical_answers"] == 3
    assert summary["tokens_per_draft_pass"] == pytest.approx((10 + 8) / 8)


@pytest.mark.model
def test_raw_passes_on_the_tiny_model(tiny_gguf, tmp_path, capsys):
    costs = bench_llm.pass_costs("tiny", threads=1, repeats=1, sizes=(1, 4))
    assert costs["ratio_to_one"][1] == 1.0 and costs["seconds"][4] > 0
    assert bench_llm.main(["parallel", "--model", "tiny", "--steps", "2", "--repeats", "1",
                           "--max-seqs", "2", "--json", str(tmp_path / "p.json")]) == 0
    result = json.loads((tmp_path / "p.json").read_text())
    assert result["sequences"] == 2 and result["step_time_ratio"] > 0
    assert json.loads(capsys.readouterr().out) == result

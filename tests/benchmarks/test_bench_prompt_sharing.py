import bench_prompt_sharing


def run(seconds, rounds, detect, ranking=("a", "b"), removed=()):
    return {"seconds": seconds, "rounds": rounds, "detect_seconds": detect,
            "ranking": list(ranking), "removed": list(removed)}


def test_summary_gives_medians_overall_and_over_items_with_a_second_round():
    rows = [{"id": "1", "off": run(100, 2, 60), "on": run(70, 2, 30)},
            {"id": "2", "off": run(50, 1, 20), "on": run(52, 1, 22, removed=["b"])},
            {"id": "3", "off": run(120, 2, 80), "on": run(80, 2, 40, ranking=("b", "a"))}]
    summary = bench_prompt_sharing.summarise(rows)
    assert summary["items"] == 3 and summary["items_with_two_rounds"] == 2
    assert summary["same_removed"] == 2 and summary["same_ranking"] == 2
    assert summary["all_seconds"] == {"off": 100, "on": 70, "ratio": 0.7}
    assert summary["two_rounds_detect_seconds"] == {"off": 70, "on": 35, "ratio": 0.5}


def test_summary_of_items_without_a_second_round_has_no_ratio_for_them():
    summary = bench_prompt_sharing.summarise([{"id": "1", "off": run(50, 1, 20),
                                                "on": run(50, 1, 20)}])
    assert summary["two_rounds_seconds"] == {"off": None, "on": None, "ratio": None}

import shared_answers


def ranked(rankings, cached=()):
    return [{"id": item, "ranking": ranking, "error": None,
             "extra": {"answer_cached": item in cached}} for item, ranking in rankings.items()]


def test_distinct_top_lists_over_the_items_every_run_has(tmp_path, write_run):
    manifest = {"dataset": "toyrank"}
    runs = [write_run(tmp_path / "none", manifest,
                      ranked({"1": ["a", "b", "c"], "2": ["x", "y"], "3": ["q"]})),
            write_run(tmp_path / "listwise", manifest,
                      ranked({"1": ["a", "c", "b"], "2": ["x", "y", "z"]}, cached={"2"})),
            write_run(tmp_path / "crossval", manifest,
                      ranked({"1": ["a", "b", "d"], "2": ["y", "x"]}))]
    by_name = {path.name: shared_answers.load_run(path)[1] for path in runs}
    top2 = shared_answers.sharing(by_name, top=2)
    assert (top2["items"], top2["answers"], top2["distinct"]) == (2, 6, 4)  # item 3: one run
    assert top2["saved"] == round(1 - 4 / 6, 3)
    assert top2["read_from_cache"] == {"none": 0, "listwise": 1, "crossval": 0}
    assert shared_answers.sharing(by_name, top=3)["distinct"] == 6

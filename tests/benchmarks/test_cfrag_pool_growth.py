import cfrag_pool_growth


def record(pool: list[str], decision: str | None = None) -> dict:
    stages = [{"name": "cfrag.counterfactuals", "decision": decision}] if decision else []
    return {"extra": {"cfrag": {"pool": pool}}, "trace": {"stages": stages}}


FACTS = {"c1": (False, True), "c2": (False, False), "d1": (True, False), "d2": (True, True)}


def test_counts_the_passages_the_counterfactuals_add_and_their_filter():
    with_cf = {"t::0": record(["c1", "d1", "c2", "d2"],
                              "kept 2 of 5 counterfactuals (3 passed the filter)"),
               "t::1": record(["c2", "d1"], "no decision this run knows"),
               "t::2": record(["c1"])}  # absent from the other run: left out
    without_cf = {"t::0": record(["c1"]), "t::1": record(["c2", "d1"])}
    counts = cfrag_pool_growth.pool_growth(with_cf, without_cf, lambda item_id: FACTS)
    assert counts["items"] == 2
    assert (counts["pool with"], counts["pool without"]) == (6, 3)
    assert (counts["added"], counts["added injected"], counts["added own"]) == (3, 2, 1)
    assert counts["added holding an answer"] == 1  # d2; c1 was in both pools
    assert (counts["generated"], counts["passed"], counts["kept"]) == (5, 3, 2)
    assert counts["decisions unread"] == 1

from faithrag.methods.cfrag.sampling import allocation, stratified_subsets

LABELS = [0, 0, 0, 0, 0, 0, 1, 1, 1, 2]  # cluster sizes 6, 3, 1


def test_allocation_is_proportional_with_one_per_cluster_at_least():
    # 4·6/10 = 2.4 -> 2; 4·3/10 = 1.2 -> 1; 4·1/10 = 0.4 -> 1 (never zero)
    assert allocation([6, 3, 1], 4) == [2, 1, 1]
    assert allocation([2, 1], 10) == [2, 1]  # capped by the cluster size


def test_every_subset_is_stratified_and_distinct():
    plan = stratified_subsets(LABELS, m=3, target=4, seed=5)
    assert len(plan.subsets) == 3 and plan.dropped_repeats == 0
    for subset in plan.subsets:
        assert [sum(LABELS[i] == c for i in subset) for c in range(3)] == [2, 1, 1]
        assert subset == sorted(subset)
    assert len({tuple(s) for s in plan.subsets}) == 3


def test_seeded_determinism():
    assert stratified_subsets(LABELS, 3, 4, seed=5) == stratified_subsets(LABELS, 3, 4, seed=5)
    draws = {tuple(map(tuple, stratified_subsets(LABELS, 3, 4, seed=s).subsets))
             for s in range(5)}
    assert len(draws) > 1


def test_small_pool_drops_repeats():
    plan = stratified_subsets([0, 0, 1], m=3, target=4, seed=0)
    assert plan.subsets == [[0, 1, 2]] and plan.dropped_repeats == 2
    assert stratified_subsets([], 3, 4, 0).subsets == []


def test_an_anchor_is_in_every_subset_and_keeps_the_stratification():
    for anchor in (0, 6, 9):  # in the big cluster, the middle one, the singleton
        for seed in range(5):
            plan = stratified_subsets(LABELS, m=3, target=4, seed=seed, anchor=anchor)
            assert plan.subsets and all(anchor in subset for subset in plan.subsets)
            for subset in plan.subsets:
                assert [sum(LABELS[i] == c for i in subset) for c in range(3)] == [2, 1, 1]
            assert len({tuple(s) for s in plan.subsets}) == len(plan.subsets)


def test_without_an_anchor_the_draws_are_unchanged():
    # pinned to the draws of the code before the anchor option: banked runs must replay them
    assert stratified_subsets(LABELS, m=3, target=4, seed=5).subsets == [
        [3, 4, 8, 9], [2, 3, 6, 9], [0, 4, 7, 9]]

from __future__ import annotations

import pytest

from faithrag.eval import stats as M


def test_wilson_interval_known_values() -> None:
    low, high = M.wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert M.wilson_interval(0, 5)[0] == 0.0
    assert M.wilson_interval(5, 5)[1] == 1.0
    narrow = M.wilson_interval(800, 1000)
    assert narrow[1] - narrow[0] < high - low
    with pytest.raises(ValueError):
        M.wilson_interval(0, 0)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    values = [1] * 70 + [0] * 30
    first = M.bootstrap_ci(values, seed=1)
    assert first == M.bootstrap_ci(values, seed=1)
    assert first[0] < 0.7 < first[1]
    assert 0.58 < first[0] < 0.66 and 0.74 < first[1] < 0.80
    continuous = [i / 7 % 1 for i in range(50)]
    assert M.bootstrap_ci(continuous, seed=1) != M.bootstrap_ci(continuous, seed=2)
    assert M.bootstrap_ci([0.5], seed=0) == (0.5, 0.5)


def test_mcnemar_exact() -> None:
    assert M.mcnemar_exact_p(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert M.mcnemar_exact_p(3, 3) == 1.0
    assert M.mcnemar_exact_p(0, 0) == 1.0
    assert M.mcnemar_exact_p(600, 400) < 1e-9  # large n stays exact and finite


def test_paired_difference() -> None:
    a = [True] * 12 + [False] * 8
    b = [True] * 2 + [False] * 10 + [True] * 2 + [False] * 6
    result = M.paired_difference(a, b, seed=0)
    assert (result["n"], result["only_a"], result["only_b"]) == (20, 10, 2)
    assert result["difference"] == pytest.approx(0.6 - 0.2)
    low, high = result["difference_ci"]
    assert low < 0.4 < high and low > 0
    assert result["mcnemar_p"] == pytest.approx(M.mcnemar_exact_p(10, 2))

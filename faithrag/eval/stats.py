"""Statistics for evaluation figures: Wilson score interval, seeded percentile bootstrap,
exact McNemar test and a paired comparison of two methods on the same items.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n <= 0:
        raise ValueError("Wilson interval needs n > 0")
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, n_resamples: int = 2000,
                 seed: int = 0, statistic: Callable[[np.ndarray], np.ndarray] | None = None
                 ) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (or of ``statistic``, which maps an array of
    shape (resamples, n) to (resamples,)), with a seeded numpy generator."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap needs at least one value")
    rng = np.random.default_rng(seed)
    stat = statistic or (lambda sample: sample.mean(axis=1))
    estimates = []
    batch = max(1, 2_000_000 // data.size)  # bound memory to ~16 MB of indices
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        estimates.append(stat(data[rng.integers(0, data.size, size=(size, data.size))]))
    alpha = (1 - confidence) / 2
    low, high = np.quantile(np.concatenate(estimates), [alpha, 1 - alpha])
    return float(low), float(high)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (items only A got right, items
    only B got right): a binomial test of min(only_a, only_b) under p = 1/2."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1))
    return min(1.0, 2 * tail / 2**n)


def paired_difference(correct_a: Sequence[bool], correct_b: Sequence[bool],
                      confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
                      ) -> dict[str, Any]:
    """Compare two methods on the same items (aligned sequences): accuracies, difference A - B
    with a paired percentile-bootstrap interval, discordant counts and the exact McNemar p."""
    if len(correct_a) != len(correct_b):
        raise ValueError("paired sequences differ in length")
    if not correct_a:
        raise ValueError("no items in common")
    a = np.asarray(correct_a, dtype=float)
    b = np.asarray(correct_b, dtype=float)
    only_a = int(((a == 1) & (b == 0)).sum())
    only_b = int(((a == 0) & (b == 1)).sum())
    low, high = bootstrap_ci(a - b, confidence, n_resamples, seed)
    return {"n": len(a), "accuracy_a": float(a.mean()), "accuracy_b": float(b.mean()),
            "difference": float(a.mean() - b.mean()), "difference_ci": [low, high],
            "only_a": only_a, "only_b": only_b, "mcnemar_p": mcnemar_exact_p(only_a, only_b)}

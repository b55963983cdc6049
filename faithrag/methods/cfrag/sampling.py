"""Evidence division: M subsets of the pool by stratified sampling over the clusters.

Each cluster is a stratum. Allocation: a subset of target size B takes
n_c = min(|C_c|, max(1, round(B·|C_c|/n))) passages from cluster c — proportional to the
cluster's size, and never zero, so every subset sees every perspective the clustering found.
Draw: within each cluster, n_c passages uniformly without replacement, from one numpy RNG seeded
per question (the same seed gives the same subsets). A subset identical to an earlier one is
redrawn (up to `redraws` times) and otherwise dropped: at temperature 0 it would only repeat a
hypothesis. Passages keep the pool's order (best relevance first) inside a subset.

With an `anchor` (a pool index), every subset holds that passage: it fills one of its cluster's
n_c places and the rest of that cluster's places are drawn as before. Not in the paper: when one
passage decides the question, plain stratified sampling leaves it out of most subsets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SubsetPlan:
    subsets: list[list[int]]  # pool indices, ascending
    allocation: list[int]  # passages drawn per cluster
    dropped_repeats: int  # subsets that could only repeat an earlier one


def allocation(cluster_sizes: list[int], target: int) -> list[int]:
    n = sum(cluster_sizes)
    return [min(size, max(1, round(target * size / n))) for size in cluster_sizes]


def stratified_subsets(labels: list[int], m: int, target: int, seed: int,
                       redraws: int = 10, anchor: int | None = None) -> SubsetPlan:
    if not labels:
        return SubsetPlan([], [], 0)
    clusters = [[i for i, label in enumerate(labels) if label == c]
                for c in sorted(set(labels))]
    counts = allocation([len(c) for c in clusters], target)
    rng = np.random.default_rng(seed)
    subsets: list[list[int]] = []
    dropped = 0

    def draw(members: list[int], count: int) -> list[int]:
        if anchor not in members:
            return [int(i) for i in rng.choice(members, size=count, replace=False)]
        others = [i for i in members if i != anchor]
        return [anchor] + [int(i) for i in rng.choice(others, size=count - 1, replace=False)]

    for _ in range(m):
        for _attempt in range(redraws + 1):
            subset = sorted(i for members, count in zip(clusters, counts)
                            for i in draw(members, count))
            if subset not in subsets:
                subsets.append(subset)
                break
        else:
            dropped += 1
    return SubsetPlan(subsets, counts, dropped)

"""Spectral clustering of evidence embeddings, in numpy (no scikit-learn).

Ng–Jordan–Weiss: RBF affinity A_ij = exp(-||x_i - x_j||² / (2σ²)) with A_ii = 0 and σ the median
pairwise distance (a scale-free choice: the embeddings' spread differs per question);
normalised Laplacian L = I - D^{-1/2} A D^{-1/2}; the eigenvectors of its K smallest eigenvalues
(numpy.linalg.eigh), rows normalised to unit length; then k-means with k-means++ seeding and a
seeded RNG, best of a few restarts by inertia.

K is clamped to max(1, min(K, n // 2)): with fewer than two passages per cluster on average,
stratified subsets could only all contain every passage."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Clustering:
    labels: list[int]  # cluster of each row, 0..k_used-1, numbered by first appearance
    k_used: int
    k_requested: int
    eigenvalues: list[float]  # the smallest ones, rounded (the spectral gap shows the structure)
    sigma: float

    def members(self) -> list[list[int]]:
        return [[i for i, label in enumerate(self.labels) if label == c]
                for c in range(self.k_used)]


def effective_k(n: int, k: int) -> int:
    return max(1, min(k, n // 2))


def spectral_clusters(vectors: np.ndarray, k: int, seed: int = 0,
                      restarts: int = 4) -> Clustering:
    x = np.asarray(vectors, dtype=np.float64)
    n = x.shape[0]
    k_used = effective_k(n, k)
    if n == 0:
        return Clustering([], 0, k, [], 0.0)
    sq = np.maximum(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1), 0.0)
    off_diagonal = np.sqrt(sq[~np.eye(n, dtype=bool)])
    sigma = float(np.median(off_diagonal)) if off_diagonal.size else 1.0
    if sigma <= 1e-12:
        sigma = 1.0
    if k_used == 1:
        return Clustering([0] * n, 1, k, [0.0], sigma)
    affinity = np.exp(-sq / (2.0 * sigma**2))
    np.fill_diagonal(affinity, 0.0)
    inv_sqrt = 1.0 / np.sqrt(np.maximum(affinity.sum(axis=1), 1e-12))
    laplacian = np.eye(n) - inv_sqrt[:, None] * affinity * inv_sqrt[None, :]
    values, vecs = np.linalg.eigh(laplacian)
    embedding = vecs[:, :k_used]
    embedding /= np.maximum(np.linalg.norm(embedding, axis=1, keepdims=True), 1e-12)
    labels = kmeans(embedding, k_used, np.random.default_rng(seed), restarts)
    return Clustering(_renumber(labels), len(set(labels.tolist())), k,
                      [round(float(v), 4) for v in values[:k_used + 1]], sigma)


def kmeans(points: np.ndarray, k: int, rng: np.random.Generator, restarts: int = 4,
           iterations: int = 100) -> np.ndarray:
    """Lloyd's algorithm from k-means++ seeds; the restart with the lowest inertia wins."""
    best_labels, best_inertia = None, np.inf
    for _ in range(restarts):
        centers = _kmeans_pp(points, k, rng)
        labels = np.full(len(points), -1)
        for _ in range(iterations):
            dist = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(-1)
            new = dist.argmin(axis=1)
            for c in range(k):
                if np.any(new == c):
                    centers[c] = points[new == c].mean(axis=0)
            if np.array_equal(new, labels):
                break
            labels = new
        inertia = float(((points - centers[labels]) ** 2).sum())
        if inertia < best_inertia - 1e-12:
            best_labels, best_inertia = labels.copy(), inertia
    return best_labels


def _kmeans_pp(points: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    centers = [points[rng.integers(len(points))]]
    for _ in range(1, k):
        d2 = ((points[:, None, :] - np.array(centers)[None, :, :]) ** 2).sum(-1).min(axis=1)
        total = d2.sum()
        index = rng.choice(len(points), p=d2 / total) if total > 0 else rng.integers(len(points))
        centers.append(points[index])
    return np.array(centers, dtype=np.float64)


def _renumber(labels: np.ndarray) -> list[int]:
    order: dict[int, int] = {}
    return [order.setdefault(int(label), len(order)) for label in labels]

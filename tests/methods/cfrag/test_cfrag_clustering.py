import numpy as np
import pytest

from faithrag.methods.cfrag.clustering import effective_k, kmeans, spectral_clusters


def groups(seed=0, per=4, dim=16, noise=0.05):
    rng = np.random.default_rng(seed)
    centers = np.eye(dim)[:3]
    x = np.vstack([c + noise * rng.standard_normal((per, dim)) for c in centers])
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_recovers_known_clusters():
    result = spectral_clusters(groups(), k=3, seed=1)
    labels = result.labels
    assert result.k_used == 3
    assert [len(set(labels[i:i + 4])) for i in (0, 4, 8)] == [1, 1, 1]
    assert len({labels[0], labels[4], labels[8]}) == 3
    assert labels[0] == 0  # numbered by first appearance
    # the smallest eigenvalue of a normalised Laplacian is 0; they are reported ascending
    assert result.eigenvalues[0] == pytest.approx(0.0, abs=1e-6)
    assert result.eigenvalues == sorted(result.eigenvalues) and len(result.eigenvalues) == 4


def test_same_seed_same_clusters_and_members():
    x = groups(seed=3, noise=0.4)
    a, b = spectral_clusters(x, 3, seed=7), spectral_clusters(x, 3, seed=7)
    assert a.labels == b.labels
    assert sorted(i for m in a.members() for i in m) == list(range(12))


def test_k_is_clamped_to_half_the_evidence():
    assert [effective_k(n, 4) for n in (0, 1, 2, 3, 5, 8, 20)] == [1, 1, 1, 1, 2, 4, 4]
    assert spectral_clusters(groups()[:3], k=4).labels == [0, 0, 0]
    assert spectral_clusters(np.zeros((0, 4)), k=4).labels == []


def test_kmeans_on_separated_points():
    points = np.array([[0.0], [0.1], [10.0], [10.2], [10.1]])
    labels = kmeans(points, 2, np.random.default_rng(0))
    assert len(set(labels[:2])) == 1 and len(set(labels[2:])) == 1 and labels[0] != labels[2]

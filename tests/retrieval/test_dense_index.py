from __future__ import annotations

import sys

import numpy as np
import pytest

from faithrag.errors import ConfigError, MissingExtraError
from faithrag.retrieval.dense_index import DenseIndex
from faithrag.retrieval.embedder import normalize_rows


def random_unit_vectors(n, dim=16, seed=0):
    return normalize_rows(np.random.default_rng(seed).normal(size=(n, dim)))


@pytest.mark.parametrize("factory", ["Flat", "HNSW32"])
def test_nearest_vector_is_itself_with_cosine_one(factory):
    vectors = random_unit_vectors(50)
    index = DenseIndex(16, factory)
    index.add(vectors)
    hits = index.search(vectors[[7, 21]], k=3)
    assert [h[0][0] for h in hits] == [7, 21]
    assert hits[0][0][1] == pytest.approx(1.0, abs=1e-5)
    assert hits[0][0][1] >= hits[0][1][1] >= hits[0][2][1]


def test_k_larger_than_index_and_save_load(tmp_path):
    vectors = random_unit_vectors(3)
    index = DenseIndex(16)
    index.add(vectors)
    assert len(index.search(vectors[:1], k=10)[0]) == 3
    index.save(tmp_path / "d.faiss")
    loaded = DenseIndex.load(tmp_path / "d.faiss", "Flat")
    assert len(loaded) == 3 and loaded.search(vectors[:1], 3) == index.search(vectors[:1], 3)


def test_empty_index_returns_nothing_and_bad_factory_is_config_error():
    assert DenseIndex(16).search(random_unit_vectors(2), k=5) == [[], []]
    with pytest.raises(ConfigError):
        DenseIndex(16, "NoSuchIndex")


def test_wrong_dimension_is_rejected():
    with pytest.raises(ValueError):
        DenseIndex(16).add(np.zeros((2, 8), dtype=np.float32))


def test_without_faiss_building_or_loading_names_the_dense_extra(tmp_path, monkeypatch):
    index = DenseIndex(16)
    index.add(random_unit_vectors(3))
    index.save(tmp_path / "dense.faiss")
    monkeypatch.setitem(sys.modules, "faiss", None)  # makes `import faiss` fail
    for make in (lambda: DenseIndex(16), lambda: DenseIndex.load(tmp_path / "dense.faiss", "Flat")):
        with pytest.raises(MissingExtraError) as err:
            make()
        assert err.value.hint == "pip install 'faithrag[dense]'"

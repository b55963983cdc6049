from __future__ import annotations

import numpy as np
import pytest

from faithrag.errors import ConfigError
from faithrag.retrieval.embedder import Embedder, get_embedder, normalize_rows


def test_unknown_embedder_name_is_a_config_error():
    with pytest.raises(ConfigError, match="minilm"):
        get_embedder("word2vec")


def test_default_embedder_is_cached_minilm(minilm):
    from faithrag.retrieval.embedding_cache import CachedEmbedder

    embedder = get_embedder("minilm", threads=1)
    assert isinstance(embedder, CachedEmbedder) and isinstance(embedder, Embedder)
    assert embedder.name == "minilm" and embedder.dim == 384
    assert not isinstance(get_embedder("minilm", use_cache=False), CachedEmbedder)


def test_normalize_rows_keeps_zero_rows():
    out = normalize_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert np.allclose(out, [[0.6, 0.8], [0.0, 0.0]])


def test_embedder_is_built_once_per_settings(minilm):
    assert get_embedder("minilm", threads=1) is get_embedder("minilm", threads=1)
    assert get_embedder("minilm", threads=1) is not get_embedder("minilm", threads=1,
                                                                  use_cache=False)

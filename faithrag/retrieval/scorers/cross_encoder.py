"""A sentence-transformers CrossEncoder loaded from a local folder (the `[st]` extra). No cross-encoder
with bundled weights exists on PyPI, so this is for users who have one on disk; torch and
sentence-transformers are imported only when the scorer is built."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from faithrag.errors import ConfigError, ModelNotFoundError
from faithrag.retrieval.st_embedder import import_sentence_transformers
from faithrag.types import Step


class CrossEncoderScorer:
    """Scores are the model's single relevance logit through a sigmoid, in [0, 1]."""

    name = "cross_encoder"

    def __init__(self, model_path: str | Path, device: str = "cpu", batch_size: int = 32,
                 max_length: int | None = None):
        path = Path(model_path)
        if not path.is_dir():
            raise ModelNotFoundError(f"No cross-encoder model folder at {path}",
                                     "Pass the path of a local sentence-transformers "
                                     "CrossEncoder folder (no hub downloads).")
        st = import_sentence_transformers()
        self._model = st.CrossEncoder(str(path), device=device, max_length=max_length,
                                      local_files_only=True)
        if self._model.num_labels != 1:
            raise ConfigError(f"{path} has {self._model.num_labels} output labels; a relevance "
                              "cross-encoder has one.", "Use a single-logit reranker model.")
        self._batch_size = batch_size
        import torch

        self._sigmoid = torch.nn.Sigmoid()  # explicit: some saved models default to Identity

    def score(self, query: str, passages: Sequence[str], step: Step | None = None) -> list[float]:
        if not passages:
            return []
        scores = self._model.predict([(query, p) for p in passages], batch_size=self._batch_size,
                                     activation_fn=self._sigmoid, show_progress_bar=False,
                                     convert_to_numpy=True)
        return [float(s) for s in np.asarray(scores).reshape(-1)]

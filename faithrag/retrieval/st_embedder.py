"""A sentence-transformers embedder from a local model folder (the `[st]` extra: torch and
sentence-transformers, imported only when this class is built)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from faithrag.errors import MissingExtraError, ModelNotFoundError
from faithrag.retrieval.embedder import normalize_rows


def import_sentence_transformers():
    try:
        import sentence_transformers
    except ImportError as exc:
        raise MissingExtraError(
            "A sentence-transformers model", "st",
            f"Importing it failed: {exc}. On a CPU-only machine install the CPU build of torch "
            "first, or use the default embedder \"minilm\".") from exc
    return sentence_transformers


class SentenceTransformerEmbedder:
    def __init__(self, model_path: str | Path, device: str = "cpu", batch_size: int = 32):
        path = Path(model_path)
        if not path.is_dir():
            raise ModelNotFoundError(f"No sentence-transformers model folder at {path}",
                                     "Pass the path of a local model folder (no hub downloads).")
        st = import_sentence_transformers()
        self._model = st.SentenceTransformer(str(path), device=device, local_files_only=True)
        self._batch_size = batch_size
        self.name = f"st:{path}"
        self.identity = f"st:{path.resolve()};max_len={self._model.max_seq_length}"
        get_dim = (getattr(self._model, "get_embedding_dimension", None)  # newer versions
                   or self._model.get_sentence_embedding_dimension)
        self.dim = int(get_dim())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(list(texts), batch_size=self._batch_size,
                                     normalize_embeddings=True, convert_to_numpy=True,
                                     show_progress_bar=False)
        return normalize_rows(vectors)

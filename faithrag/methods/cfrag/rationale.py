"""The extracted rationale of a hypothesis: the sentence of its evidence subset that the
bi-encoder finds closest to the question followed by the answer (cfrag.rationale = "extracted").
It stands where the paper has the model's own rationale: in the coherence score (embedded with
the answer) and in the synthesis prompt, where it shows the candidate's evidence."""

from __future__ import annotations

from collections.abc import Sequence

from faithrag.methods.cfrag.vectors import VectorMemo
from faithrag.retrieval.chunking import sentence_spans


def closest_sentence(question: str, answer: str, texts: Sequence[str],
                     vectors: VectorMemo) -> str:
    """"" when the subset has no text."""
    sentences = list(dict.fromkeys(text[a:b] for text in texts for a, b in sentence_spans(text)))
    if not sentences:
        return ""
    similarity = vectors.cosine([f"{question} {answer}"], sentences)[0]
    return sentences[int(similarity.argmax())]

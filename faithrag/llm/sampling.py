"""Decoding primitives over numpy logit rows, for the embedded backend: a request's token bias
as one dense vector (`DenseBias`), the greedy or sampled pick, the pick under a grammar, and
log-softmax at given ids."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faithrag.llm.base import TokenBias
from faithrag.llm.grammar import GrammarMask

# greedy decoding under a grammar: how many of the best tokens are checked one by one before the
# whole row is masked
GRAMMAR_CANDIDATES = 16


class DenseBias:
    """A TokenBias densified once per request; adds itself to a logits row in place.

    Called as `processor(input_ids, scores)`, the signature of llama-cpp-python's
    LogitsProcessor. Holds one float32 vector (or none, for an empty bias) for the whole request.
    """

    def __init__(self, bias: TokenBias | None, n_vocab: int):
        self.vector = bias.dense(n_vocab) if bias else None

    def __call__(self, input_ids: object, scores: np.ndarray) -> np.ndarray:
        if self.vector is not None:
            scores += self.vector
        return scores


def log_softmax_at(rows: np.ndarray, ids: Sequence[int]) -> np.ndarray:
    """log_softmax(rows[j])[ids[j]] for each row j."""
    top = rows.max(axis=1)
    lse = top + np.log(np.exp(rows - top[:, None]).sum(axis=1))
    return rows[np.arange(len(ids)), np.asarray(ids)] - lse


def pick(scores: np.ndarray, temperature: float, rng: np.random.Generator | None) -> int:
    """The argmax (greedy: no `rng` or temperature 0), else a draw from softmax(scores / T)."""
    if rng is None or temperature <= 0:
        return int(np.argmax(scores))
    z = scores / temperature
    cdf = np.cumsum(np.exp(z - z.max()))
    return min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(cdf) - 1)


def constrained_pick(scores: np.ndarray, temperature: float, rng: np.random.Generator | None,
                     grammar: GrammarMask) -> tuple[int | None, bool]:
    """The pick among the tokens `grammar` admits (None when it admits none), and whether the
    whole row was masked for it. Greedy: the best of the GRAMMAR_CANDIDATES highest-scored
    tokens that the grammar admits, which is the argmax of the masked row (ties to the lower id,
    as np.argmax); the whole row is masked only when none of them is admitted. Sampling: drawn
    from the masked row."""
    if rng is None or temperature <= 0:
        top = np.argpartition(scores, -GRAMMAR_CANDIDATES)[-GRAMMAR_CANDIDATES:]
        for candidate in top[np.lexsort((top, -scores[top]))]:
            if grammar.allows(int(candidate)):
                return int(candidate), False
    masked = scores.copy()
    grammar.mask(masked)
    if not np.isfinite(masked).any():
        return None, True
    return pick(masked, temperature, rng), True

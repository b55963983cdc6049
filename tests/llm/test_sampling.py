"""Decoding primitives: the dense bias, the pick and the pick under a grammar."""

from __future__ import annotations

import numpy as np

from faithrag.llm.base import TokenBias
from faithrag.llm.sampling import GRAMMAR_CANDIDATES, DenseBias, constrained_pick, pick


class Admits:
    """A grammar that admits the ids given."""

    def __init__(self, ids):
        self.ids = set(ids)

    def allows(self, token):
        return token in self.ids

    def mask(self, row):
        row[[i for i in range(len(row)) if i not in self.ids]] = -np.inf


def test_dense_bias_is_one_vector_added_in_place():
    processor = DenseBias(TokenBias.from_mapping({1: 2.0, 4: -1.5, 99: 7.0}), n_vocab=6)
    vector = processor.vector
    first, second = np.zeros(6, np.float32), np.ones(6, np.float32)
    assert processor(None, first) is first
    processor(None, second)
    assert processor.vector is vector  # the same dense vector serves every step
    np.testing.assert_array_equal(first, [0, 2, 0, 0, -1.5, 0])  # id 99 is outside the vocab
    np.testing.assert_array_equal(second, [1, 3, 1, 1, -0.5, 1])
    assert DenseBias(None, 6).vector is None and DenseBias(TokenBias.empty(), 6).vector is None


def test_the_pick_is_the_argmax_when_greedy_and_a_draw_when_sampling():
    scores = np.array([0.0, 3.0, 1.0], np.float32)
    assert pick(scores, 0.0, None) == 1 and pick(scores, 1.0, None) == 1
    rng = np.random.default_rng(0)
    assert {pick(scores, 5.0, rng) for _ in range(200)} == {0, 1, 2}


def test_under_a_grammar_the_best_admitted_token_is_picked_and_the_row_masked_only_if_needed():
    scores = np.arange(64, dtype=np.float32)  # id 63 is the best
    assert constrained_pick(scores, 0.0, None, Admits({60, 10})) == (60, False)
    far = 63 - GRAMMAR_CANDIDATES  # outside the candidates checked one by one
    assert constrained_pick(scores, 0.0, None, Admits({far, 3})) == (far, True)
    assert constrained_pick(scores, 0.0, None, Admits(set())) == (None, True)

import math

import numpy as np
import pytest

from faithrag.methods.cfrag.scoring import (
    causal_discrimination,
    coherence,
    confidence,
    psi,
    specificity,
)


def test_coherence_is_the_mean_clipped_cosine_with_the_evidence():
    evidence = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    assert coherence(np.array([1.0, 0.0]), evidence) == pytest.approx(1 / 3)  # (1 + 0 + 0) / 3
    assert coherence(np.array([1.0, 0.0]), np.zeros((0, 2))) == 0.0


def test_causal_uses_the_strongest_counterfactual_not_the_mean():
    question = [0.9, 0.8]
    rivals = [[0.1, 0.7], [0.3, 0.9]]
    # max per passage: 0.3, 0.9 -> (0.6 + -0.1) / 2; the mean would give (0.7 + 0.0) / 2
    assert causal_discrimination(question, rivals) == pytest.approx(0.25)
    assert causal_discrimination(question, []) is None


def test_psi_confidence_and_specificity():
    assert psi(0.5, 0.25, 0.4) == pytest.approx(0.6 * 0.5 + 0.4 * 0.25)
    assert psi(0.5, 0.25, 0.4, conf=0.8, spec=0.2, conf_weight=0.1,
               spec_weight=0.1) == pytest.approx(0.4 + 0.08 + 0.02)
    assert psi(0.5, None, 0.4) == 0.5  # no causal score: coherence alone
    assert confidence(-0.1) == pytest.approx(math.exp(-0.1)) and confidence(None) is None
    h, q = np.array([1.0, 0.0]), np.array([0.8, 0.6])
    assert specificity(h, q, np.array([[0.6, 0.8], [1.0, 0.0]])) == pytest.approx(0.8 - 1.0)
    assert specificity(h, q, np.zeros((0, 2))) is None

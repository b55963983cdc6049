"""Scores of one hypothesis h drafted from evidence subset E (all plain numbers in, numbers out).

- coherence (paper eq. 9–10, as built here with our tools): how well the hypothesis — its answer
  and rationale, embedded as one text — agrees with the evidence it was drafted from:
  coh(h) = mean_{e in E} max(0, cos(v(h), v(e))) with the bi-encoder v. The paper's equations
  were not reachable from this machine (DESIGN.md § 4 names them without reproducing them); this
  is the per-evidence alignment averaged over the subset, with negative cosines clipped so that
  an unrelated passage counts as no support rather than as evidence against.
- causal discrimination: causal(h) = mean_{e in E} [s(q, e) - max_{q'} s(q', e)] with the
  pluggable relevance scorer s (LLM judge or bi-encoder) and q' the counterfactuals: evidence
  that answers the question but not its near-miss variants scores high; evidence that is merely
  about the topic scores about 0 or below. Undefined (None) without counterfactuals.
- confidence (optional): exp(mean token log-prob of the draft), in (0, 1].
- specificity (optional): cos(v(h), v(q)) - max_{q'} cos(v(h), v(q')) — the hypothesis answers
  this question rather than one of its counterfactuals.
- Ψ = (1-λ)·coh + λ·causal (λ = 0.4), plus w_conf·confidence and w_spec·specificity when those are
  switched on. Without a causal score (no counterfactuals, or the ablation) Ψ = coherence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class HypothesisScore:
    coherence: float
    causal: float | None
    confidence: float | None
    specificity: float | None
    psi: float

    def summary(self) -> dict[str, float | None]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)
        return {"psi": r(self.psi), "coherence": r(self.coherence), "causal": r(self.causal),
                "confidence": r(self.confidence), "specificity": r(self.specificity)}


def coherence(hypothesis: np.ndarray, evidence: np.ndarray) -> float:
    if len(evidence) == 0:
        return 0.0
    return float(np.clip(np.asarray(evidence) @ np.asarray(hypothesis), 0.0, None).mean())


def causal_discrimination(question_scores: Sequence[float],
                          counterfactual_scores: Sequence[Sequence[float]]) -> float | None:
    """`question_scores[j]` = s(q, e_j); `counterfactual_scores[i][j]` = s(q'_i, e_j)."""
    if not counterfactual_scores or not question_scores:
        return None
    q = np.asarray(question_scores, dtype=float)
    strongest_rival = np.asarray(counterfactual_scores, dtype=float).max(axis=0)
    return float((q - strongest_rival).mean())


def confidence(mean_logprob: float | None) -> float | None:
    return None if mean_logprob is None else math.exp(mean_logprob)


def specificity(hypothesis: np.ndarray, question: np.ndarray,
                counterfactuals: np.ndarray) -> float | None:
    if len(counterfactuals) == 0:
        return None
    return float(hypothesis @ question - (np.asarray(counterfactuals) @ hypothesis).max())


def psi(coh: float, causal: float | None, lam: float, conf: float | None = None,
        spec: float | None = None, conf_weight: float = 0.0, spec_weight: float = 0.0) -> float:
    score = coh if causal is None else (1.0 - lam) * coh + lam * causal
    if conf is not None:
        score += conf_weight * conf
    if spec is not None:
        score += spec_weight * spec
    return score

"""A TokenBias as OpenAI's `logit_bias`: clamped to the range servers take, and capped for a
server that takes only so many entries (api.openai.com: 300)."""

from __future__ import annotations

from faithrag.llm.base import TokenBias

LOGIT_BIAS_LIMIT = 100.0  # OpenAI and vLLM accept values in [-100, 100]


def logit_bias_payload(bias: TokenBias, cap: int | None = None) -> tuple[dict[str, float], list[str]]:
    """`bias` as an OpenAI `logit_bias` map (string token id -> value), plus warnings.

    Values are clamped to [-100, 100]. When `cap` is set and the bias has more entries, the kept
    entries are chosen by: largest |value| first; on equal |value|, boosts (positive) before
    suppressions; then lower token id. For CSRAG (alpha=-1 on the parametric set T_p, beta=+3 on
    the context set T_c) this keeps context-only tokens (+3) first, then tokens in both (+2), and
    only then the suppressed parametric tokens (-1): the context boost is what makes the answer
    follow the evidence.
    """
    warnings: list[str] = []
    entries = [(int(i), float(v)) for i, v in zip(bias.ids.tolist(), bias.values.tolist()) if v]
    clamped = sum(1 for _, v in entries if abs(v) > LOGIT_BIAS_LIMIT)
    if clamped:
        warnings.append(f"logit_bias: {clamped} value(s) clamped to [-100, 100]")
    entries = [(i, max(-LOGIT_BIAS_LIMIT, min(LOGIT_BIAS_LIMIT, v))) for i, v in entries]
    if cap is not None and len(entries) > cap:
        entries.sort(key=lambda e: (-abs(e[1]), e[1] < 0, e[0]))
        warnings.append(
            f"logit_bias capped at {cap} of {len(entries)} entries (kept the largest |bias|, "
            f"boosts before suppressions on ties); {len(entries) - cap} token(s) unbiased")
        entries = entries[:cap]
    return {str(i): v for i, v in sorted(entries)}, warnings

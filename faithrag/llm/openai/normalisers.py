"""The normaliser a logit bias adds at one position, bounded from a server's top log-probs.

Servers report log-probs before `logit_bias`. Under a bias b, the biased log-prob of token t is
log p(t) + b_t - log Z, with Z = sum_v p(v) exp(b_v): where Z differs between the options being
scored it must be subtracted, and a server tells only the top log-probs of a position. A listed
token's probability is known, one not listed is at most the smallest listed, and all unlisted
ones together at most the rest of the mass (`log_normaliser_bounds`); a biased token listed under
a text several tokens share (byte fragments) is asked on its own. The options get the middle of
their bounds, and the result's `probability_error` the most a probability can then be off;
above PROBABILITY_TOLERANCE they are refused, naming the bound reached.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from faithrag.errors import ServerRejectedError
from faithrag.llm.base import ChoiceScores
from faithrag.llm.openai.forced import WIDE_TOP_LOGPROBS, ForcedReply, ForcedTokens

# the most a choice probability under a bias may be off when its normaliser is bounded from top
# log-probs: a quarter of the 0.02 that server and embedded probabilities are held to
PROBABILITY_TOLERANCE = 0.005


def log_normaliser_bounds(bias: Mapping[int, float], known: Mapping[int, float],
                          free_mass: float, caps: Mapping[int, float]) -> tuple[float, float]:
    """Lower and upper bounds on log Z, the normaliser a logit bias adds at one position.

    With the model's own (pre-bias) probabilities p, the biased log-prob of token t is
    log p(t) + b_t - log Z, where Z = sum_v p(v) exp(b_v) = 1 + sum_{v biased} p(v) (exp(b_v) - 1).
    `known`: token -> p(token) for the tokens whose probability is known exactly (a server's top
    log-probs, the forced token); `free_mass`: the most the probabilities of all other tokens can
    add up to (1 - sum of `known`); `caps`: for a biased token not in `known`, the most its
    probability can be (a token outside a top-N list is at most the N-th probability); a biased
    token missing from both is capped by `free_mass` alone. The bounds are tight for these
    constraints: the unknown mass goes to the most boosted (upper) or most suppressed (lower)
    tokens first. Exact (equal bounds) when every biased token is known or `free_mass` is 0.

    Example::

        lo, hi = log_normaliser_bounds({7: 3.0}, known={1: 0.9}, free_mass=0.1, caps={7: 0.02})
        # lo = log 1 = 0 (token 7 may have no mass), hi = log(1 + 0.02 (e^3 - 1))
    """
    base = 1.0 + sum(p * math.expm1(bias[v]) for v, p in known.items() if v in bias)
    free_mass = max(0.0, free_mass)
    unknown = sorted((math.expm1(b), min(caps.get(v, free_mass), free_mass))
                     for v, b in bias.items() if v not in known and b)
    high, room = base, free_mass
    for gain, cap in reversed(unknown):  # the largest boosts take the mass first
        if gain <= 0 or room <= 0:
            break
        high += gain * min(cap, room)
        room -= min(cap, room)
    low, room = base, free_mass
    for gain, cap in unknown:  # the strongest suppressions take it first
        if gain >= 0 or room <= 0:
            break
        low += gain * min(cap, room)
        room -= min(cap, room)
    return math.log(max(low, 1e-300)), math.log(max(high, 1e-300))


def probability_error(lows: Sequence[float], highs: Sequence[float],
                      reported: Sequence[float]) -> float:
    """The most a softmax probability of `reported` scores can differ from that of any scores
    with each score i in [lows[i], highs[i]]: for each option its probability is largest when its
    score is at its high end and every other at its low end, and smallest the other way round."""
    top = max(reported)
    exps = [math.exp(r - top) for r in reported]
    shown = [e / sum(exps) for e in exps]
    worst = 0.0
    for i, p in enumerate(shown):
        others_low = sum(math.exp(min(lows[j] - highs[i], 700.0))
                         for j in range(len(shown)) if j != i)
        others_high = sum(math.exp(min(highs[j] - lows[i], 700.0))
                          for j in range(len(shown)) if j != i)
        worst = max(worst, 1.0 / (1.0 + others_low) - p, p - 1.0 / (1.0 + others_high))
    return worst


def bound_normalisers(scores: ChoiceScores, prompts: list[set[str]],
                      unshared: dict[str, tuple[int, ForcedReply]], bias: dict[int, float],
                      forced: ForcedTokens) -> None:
    """Subtract from each choice's score the bias's log-normaliser at its positions that not
    every choice has (`prompts`: each choice's prompt texts; `unshared`: prompt text -> a forced
    token and its reply), each taken as the middle of its bounds from the reply's top
    log-probs; set `scores.probability_error`, or refuse when it exceeds
    PROBABILITY_TOLERANCE."""
    verdict = forced.probe()
    if not verdict.raw_tops:
        raise ServerRejectedError(
            "Could not score the choices exactly: under a logit bias, choices of several "
            "tokens need each position's normaliser, and the top log-probs this server "
            "returns with a forced token are not the model's own.",
            "Score these choices with the embedded backend (--llm llamacpp).")
    known = {prompt: _known_probabilities(forced, token, reply)
             for prompt, (token, reply) in unshared.items()}
    # a biased token listed under a text that several tokens share: asked on its own
    shared_text = [(prompt, v) for prompt, (_, reply) in unshared.items()
                   for v in _listed_under_shared_text(forced, reply, bias, known[prompt])]
    for (prompt, v), reply in zip(shared_text, forced.replies(shared_text)):
        known[prompt][v] = math.exp(reply.logprob)
    bounds = {prompt: _position_bounds(forced, reply, bias, known[prompt])
              for prompt, (_, reply) in unshared.items()}
    lows = [lp - sum(bounds[p][1] for p in ps if p in bounds)
            for lp, ps in zip(scores.logprobs, prompts)]
    highs = [lp - sum(bounds[p][0] for p in ps if p in bounds)
             for lp, ps in zip(scores.logprobs, prompts)]
    middles = [(low + high) / 2 for low, high in zip(lows, highs)]
    error = 0.0 if lows == highs else probability_error(lows, highs, middles)
    where = (f"the bias's normaliser at {len(bounds)} position(s), bounded from the "
             f"server's top {verdict.top_n} log-probs at each")
    if error > PROBABILITY_TOLERANCE:
        wider = "" if verdict.top_n >= WIDE_TOP_LOGPROBS else (
            f", or serve the model where {WIDE_TOP_LOGPROBS} top log-probs are returned "
            f"(python -m llama_cpp.server; vLLM with --max-logprobs {WIDE_TOP_LOGPROBS})")
        raise ServerRejectedError(
            f"Could not score the choices exactly: under the logit bias their probabilities "
            f"are known only to within {error:.3f} ({where}), more than the "
            f"{PROBABILITY_TOLERANCE} allowed.",
            f"Score these choices with the embedded backend (--llm llamacpp){wider}.")
    scores.logprobs = middles
    scores.probability_error = error
    if error > 0:
        scores.warnings.append(f"option probabilities within {error:.2g} of the exact "
                               f"ones ({where})")


def _known_probabilities(forced: ForcedTokens, token: int,
                         reply: ForcedReply) -> dict[int, float]:
    """Token -> probability for the forced token and each top log-prob whose text names
    one token only."""
    known = {token: math.exp(reply.logprob)}
    for key, logprob in reply.top:
        ids = forced.top_key_ids(key)
        if ids is not None and len(ids) == 1:
            known.setdefault(ids[0], math.exp(logprob))
    return known


def _listed_under_shared_text(forced: ForcedTokens, reply: ForcedReply, bias: dict[int, float],
                              known: dict[int, float]) -> list[int]:
    """Biased tokens of unknown probability whose text is among the top log-probs' (a text
    that several tokens share, so the listed value may be another token's)."""
    shown = {key.replace("\ufffd", "") for key, _ in reply.top}
    return [v for v in bias if v not in known and forced.top_key(v) in shown]


def _position_bounds(forced: ForcedTokens, reply: ForcedReply, bias: dict[int, float],
                     known: dict[int, float]) -> tuple[float, float]:
    """`log_normaliser_bounds` at the position of `reply` given the `known` probabilities:
    a biased token whose text is not among the top log-probs is at most the smallest of
    them (the forced token's aside), any other unknown one at most the unknown mass."""
    free = 1.0 - sum(known.values())
    below_top = min((math.exp(lp) for key, lp in reply.top if key != reply.token),
                    default=free)
    shown = {key.replace("\ufffd", "") for key, _ in reply.top}
    caps = {}
    for v in bias:
        if v not in known:
            key = forced.top_key(v)
            caps[v] = free if key is None or key in shown else below_top
    return log_normaliser_bounds(bias, known, free, caps)

"""Forced-token log-probs: a token's log-prob after a prompt, read from a /v1/completions reply
whose one generated token was forced with `logit_bias` (or several tokens, forced by a grammar
that admits only their text), as servers report log-probs before the bias.

Whether a server can be read that way is found by a capability probe, made once per backend
(`ForcedTokens.probe`): it asks for the top log-probs after a fixed text, forces the runner-up
with `logit_bias`, and accepts the server only if the forced token comes back with the log-prob
it had unforced. The same reply tells whether the top log-probs of a forced request are the
unforced ones (a bias's normaliser can be bounded from them), one more request whether the
server returns WIDE_TOP_LOGPROBS of them (else TOP_LOGPROBS are asked), and one more whether a
GBNF `grammar` admitting only the runner-up's text gives the same log-prob (then an option of
several tokens is asked in one such request). Replies are cached per backend (bounded:
FORCED_CACHE_SIZE), so scoring the same prompt under several biases asks once.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faithrag.errors import ConfigError, ServerRejectedError
from faithrag.llm.grammar import gbnf_literal
from faithrag.llm.openai.bias import LOGIT_BIAS_LIMIT
from faithrag.llm.openai.detect import PROBE_TEXT
from faithrag.llm.openai.replies import completion_logprobs
from faithrag.llm.openai.session import ServerSession

TOP_LOGPROBS = 20  # the most OpenAI and vLLM (default max_logprobs) return per position
# asked of a server that takes more (llama-cpp-python's sorts the whole vocabulary either way)
WIDE_TOP_LOGPROBS = 1000
# forced-token replies each backend keeps, by (prompt, token); each holds its position's top
# log-probs (up to WIDE_TOP_LOGPROBS, about 0.15 MB)
FORCED_CACHE_SIZE = 256


@dataclass(frozen=True)
class ForcedReply:
    """A forced-token request's answer: the forced token's log-prob, the text the server gave
    it, and the position's top log-probs (text or "token_id:N" -> log-prob), all before the
    bias."""

    logprob: float
    token: str
    top: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class ForcedScoring:
    """The capability probe's verdict on a server."""

    usable: bool  # a token forced by logit_bias comes back with its unforced log-prob
    raw_tops: bool = False  # a forced reply's top log-probs are the unforced ones
    top_n: int = TOP_LOGPROBS  # top log-probs asked per forced token
    tops_by_id: bool = False  # top log-probs name token ids ("token_id:N")
    grammar_runs: bool = False  # a grammar forces a choice's tokens in one request


class ForcedTokens:
    """Forced-token requests to the server of `session`, and the probe that allows them."""

    def __init__(self, session: ServerSession):
        self._session = session
        self._url = session.transport.base_url + "/completions"
        self.scoring: ForcedScoring | None = None  # the probe's verdict, once made
        self._lock = threading.Lock()
        self._top_key_ids_table: dict[str, list[int]] | None = None  # token text -> ids
        self.replies_cached = functools.lru_cache(maxsize=FORCED_CACHE_SIZE)(self._reply)
        self.runs_cached = functools.lru_cache(maxsize=FORCED_CACHE_SIZE)(self._run)

    def forget(self) -> None:
        """Drop the replies remembered (not the probe's verdict)."""
        self.replies_cached.cache_clear()
        self.runs_cached.cache_clear()

    # ----------------------------------------------------------------- the probe
    def probe(self) -> ForcedScoring:
        """The capability probe's verdict, made once (see the module docstring)."""
        if self.scoring is None:
            self._session.tokens.ensure()
            with self._lock:
                if self.scoring is None:
                    self.scoring = self._probe()
        return self.scoring

    def _probe(self) -> ForcedScoring:
        """Ask for the top log-probs after a fixed text, force a runner-up, compare. The
        requests are sent as scoring requests are (`post_scoring`), so all of them read the
        probe text alike."""
        tokens = self._session.tokens
        payload: dict[str, Any] = {"model": self._session.model, "prompt": PROBE_TEXT,
                                   "max_tokens": 1, "temperature": 0.0, "logprobs": 5}
        try:
            data = self._probe_scoring(payload)
            if data is None:
                return ForcedScoring(usable=False)
            tops = completion_logprobs(data, self._url).get("top_logprobs") or []
            unforced = {str(k): float(v) for k, v in (tops[0] or {}).items()} if tops else {}
            tops_by_id = any(k.startswith("token_id:") for k in unforced)
            ranked = sorted(unforced.items(), key=lambda e: -e[1])
            for key, logprob in ranked[1:]:
                ids = self.top_key_ids(key) if key.startswith("token_id:") else tokens.tokenize(key)
                if ids is None or len(ids) != 1:
                    continue
                text = tokens.detokenize(ids)
                forced = self._probe_scoring({
                    **payload, "logit_bias": {str(ids[0]): LOGIT_BIAS_LIMIT}})
                reply = None if forced is None else self.read_forced(forced, ids[0])
                if reply is None or abs(reply.logprob - logprob) >= 1e-3:
                    return ForcedScoring(usable=False)
                seen = dict(reply.top)
                raw_tops = all(abs(seen.get(k, math.inf) - v) < 1e-3 for k, v in unforced.items())
                top_n = self._widest_top_logprobs(payload)
                run = self._probe_scoring({
                    **payload, "grammar": "root ::= " + gbnf_literal(text)})
                run_reply = None if run is None else self.read_forced(run, ids[0])
                grammar_runs = run_reply is not None and abs(run_reply.logprob - logprob) < 1e-3
                return ForcedScoring(True, raw_tops, top_n, tops_by_id, grammar_runs)
        except (ServerRejectedError, ConfigError, KeyError, TypeError, ValueError,
                AttributeError):
            return ForcedScoring(usable=False)
        return ForcedScoring(usable=False)

    def _probe_scoring(self, payload: dict[str, Any]) -> Any:
        """`post_scoring`, or None when the server refuses the request (4xx)."""
        try:
            return self._session.post_scoring(payload)
        except ServerRejectedError:
            return None

    def _widest_top_logprobs(self, payload: dict[str, Any]) -> int:
        """WIDE_TOP_LOGPROBS when the server returns more than TOP_LOGPROBS top log-probs per
        position (llama-cpp-python; vLLM started with a larger --max-logprobs), else
        TOP_LOGPROBS (vLLM's default cap refuses more)."""
        data = self._probe_scoring({**payload, "logprobs": WIDE_TOP_LOGPROBS})
        try:
            tops = completion_logprobs(data, self._url).get("top_logprobs") or [{}]
            wide = len(tops[0] or {}) > TOP_LOGPROBS + 1
        except (ServerRejectedError, AttributeError, TypeError):
            wide = False
        return WIDE_TOP_LOGPROBS if wide else TOP_LOGPROBS

    # ----------------------------------------------------------------- forced requests
    def read_forced(self, data: Any, token: int) -> ForcedReply | None:
        """The reply to a forced-token request, if its one generated token is `token`."""
        replies = self.read_run(data, (token,))
        return None if replies is None else replies[0]

    def read_run(self, data: Any, tokens: Sequence[int]) -> tuple[ForcedReply, ...] | None:
        """The reply to a request that forced `tokens`, one per generated token, if the server
        generated exactly those tokens."""
        logprobs = completion_logprobs(data, self._url)
        texts, values = logprobs.get("tokens") or [], logprobs.get("token_logprobs") or []
        if len(texts) != len(tokens) or len(values) != len(tokens) or None in values:
            return None
        for text, token in zip(texts, tokens):
            piece = self._session.tokens.detokenize([token]).replace("\ufffd", "")
            if text not in (f"token_id:{token}", piece) and text.replace("\ufffd", "") != piece:
                return None
        tops = list(logprobs.get("top_logprobs") or [])
        tops += [None] * (len(tokens) - len(tops))
        return tuple(
            ForcedReply(float(value), str(text), tuple(
                (str(k), float(v)) for k, v in (top if isinstance(top, dict) else {}).items()
                if v is not None))
            for text, value, top in zip(texts, values, tops))

    def replies(self, steps: list[tuple[str, int]]) -> list[ForcedReply]:
        """`replies_cached` of each (prompt, token), `concurrency` at once, in input order."""
        return self._session.transport.map(lambda step: self.replies_cached(*step), steps)

    def _run(self, prompt: str, tokens: tuple[int, ...]) -> tuple[ForcedReply, ...] | None:
        """One /v1/completions request on `prompt` whose grammar admits only the text of
        `tokens`, and `logit_bias` favours those tokens among the spellings the grammar admits:
        each token's log-prob and its position's top `top_n` log-probs, before the grammar and
        the bias; None when the server spelled that text with other tokens."""
        payload: dict[str, Any] = {
            "model": self._session.model, "prompt": prompt, "max_tokens": len(tokens),
            "temperature": 0.0, "logprobs": self.probe().top_n,
            "grammar": "root ::= " + gbnf_literal(self._session.tokens.detokenize(list(tokens))),
            "logit_bias": {str(t): LOGIT_BIAS_LIMIT for t in dict.fromkeys(tokens)}}
        return self.read_run(self._session.post_scoring(payload), tokens)

    def _reply(self, prompt: str, token: int) -> ForcedReply:
        """One /v1/completions request on `prompt` with `token` forced by logit_bias: its
        log-prob and the top `top_n` log-probs of that position, both before the bias."""
        payload: dict[str, Any] = {
            "model": self._session.model, "prompt": prompt, "max_tokens": 1,
            "temperature": 0.0, "logprobs": self.probe().top_n,
            "logit_bias": {str(token): LOGIT_BIAS_LIMIT},
            **self._session.flavour().token_id_fields()}
        reply = self.read_forced(self._session.post_scoring(payload), token)
        if reply is None:
            raise ServerRejectedError(
                f"Could not score the choices: {self._url} did not return the log-prob of token "
                f"{token} forced with logit_bias.",
                "Check the server's log; the embedded backend (--llm llamacpp) scores choices "
                "exactly.")
        return reply

    # ----------------------------------------------------------------- top log-prob keys
    def top_key(self, token: int) -> str | None:
        """The text under which the server lists `token` among top log-probs (vLLM:
        "token_id:N", as is a llama-server's that lists ids, once read by
        `completion_logprobs`; else the token's text, from a local tokenizer only), or None."""
        if self._session.flavour().lists_token_ids or self.probe().tops_by_id:
            return f"token_id:{token}"
        local = self._session.tokens.local
        if local is None:
            return None
        return local.decode([token]).replace("\ufffd", "")

    def top_key_ids(self, key: str) -> list[int] | None:
        """The tokens a top log-prob's text may stand for (None: unknown). Text keys are
        resolved with a table of every token's text, built once from the local tokenizer."""
        if key.startswith("token_id:") and key[len("token_id:"):].isdigit():
            return [int(key[len("token_id:"):])]
        local = self._session.tokens.local
        if local is None:
            return None
        if self._top_key_ids_table is None:
            with self._lock:
                if self._top_key_ids_table is None:
                    table: dict[str, list[int]] = {}
                    for i in range(local.vocab_size):
                        table.setdefault(local.decode([i]).replace("\ufffd", ""), []).append(i)
                    self._top_key_ids_table = table
        return self._top_key_ids_table.get(key.replace("\ufffd", ""), [])

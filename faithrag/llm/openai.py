"""The LLM protocol over any OpenAI-compatible HTTP server (vLLM, SGLang, llama.cpp's llama-server,
llama-cpp-python's server, OpenAI), with httpx and no SDK.

Generation is `POST {base_url}/chat/completions`; a TokenBias travels as `logit_bias` (see
`logit_bias_payload` for clamping and the cap). Token ids must come from the tokenizer the server
uses: `tokenizer="server"` asks the server itself, otherwise a local tokenizer (a preset or .gguf
through llama-cpp-python with `vocab_only=True`, or a Hugging Face tokenizer.json; see
faithrag/llm/tokenizers.py) is checked once against the server's tokenize endpoint when it has
one. Tokenizations and detokenizations asked of the server are cached per backend (bounded:
TOKENIZE_CACHE_SIZE texts), so a text costs one request however often a stage asks for it.

Choice scoring is exact or refused, never made up (see `score_choices`): a capability probe, made
once per backend, finds whether the server reports the log-prob of a token forced with
`logit_bias` as the model's own (and the top log-probs of that reply as well, and how many it
returns); if so each choice token is read that way, and under a bias each position's normaliser
is bounded from those top log-probs.

What the servers offer, and what this backend uses of it (from each project's source and docs;
llama-cpp-python's server is the one exercised by the tests):
- vLLM: POST /tokenize (text, or messages through the chat template) and /detokenize at the root;
  context window from /v1/models `max_model_len`; prompt log-probs with echo.
- llama.cpp llama-server: POST /tokenize, /detokenize and /apply-template (the chat template) at
  the root (/tokenize with `with_pieces` gives each id's text too); context window from GET
  /props `default_generation_settings.n_ctx`; no prompt log-probs with echo (only the generated
  tokens').
- llama-cpp-python server (`python -m llama_cpp.server`): POST /extras/tokenize (adds BOS when
  the model does; we drop it) and /extras/detokenize; `logit_bias` keys are token ids unless
  `logit_bias_type="tokens"` is sent (we never send it); log-probs need `logits_all`, on by
  default in its server; the context window is not exposed (pass `context_window`, else a
  local GGUF tokenizer's trained context length is used); no chat template endpoint (a local
  GGUF tokenizer renders the GGUF's template exactly as it does). Log-probs (0.3.36) are those
  before `logit_bias`, so a forced token reports its own; echoed prompt log-probs are right only
  when the prompt starts with the BOS token, and are slow (a Python sort of the vocabulary per
  prompt token). Every request with log-probs also pays a log-softmax over the whole prompt's
  logits, so choice scoring forces an option's tokens with a grammar in one request. It reads a
  prompt after the prefix it shares with the previous request, and the log-probs it reports
  depend on that history, so each scoring request follows one that empties its prompt cache.
- OpenAI (and SGLang unless it offers one of the endpoints above): no tokenize endpoint, so pass
  the served model's tokenizer; at most 300 `logit_bias` entries (`logit_bias_cap=300`).

Structured output: a request's `schema` is sent as OpenAI's `response_format` {"type":
"json_schema", "json_schema": {"name", "schema", "strict"}} (OpenAI, vLLM, llama.cpp's
llama-server); a server that refuses that form gets the schema compiled to GBNF here (when
llama-cpp-python is installed) as `grammar` (llama-cpp-python's server), then llama-cpp-python's
{"type": "json_object", "schema": ...}. That last form is skipped for a schema with an `enum` or
`const` string holding a quote or backslash: llama-cpp-python's server compiles such a schema to
a grammar it cannot parse, and aborts. A `grammar` (GBNF) is sent as `grammar` (llama.cpp's
servers) and `guided_grammar` (vLLM). The first form a server takes is used from then on; when it
refuses every form (an error answer to the structured request that the same request without
structure does not get), the request is sent unconstrained, and so are all later ones of that
kind, with one warning (in that completion's warnings and the log); a schema that no form left
can carry goes unconstrained, with one warning naming what would carry it. A reply to a schema
that does not parse as JSON (and was not cut by max_tokens, nor by a stop string after an
opening brace or bracket) says once that the server may ignore `response_format`. A request
sent with its structure asks for `base.decoding_cap` tokens (up to CHARS_PER_TOKEN ×
max_tokens, within the context window after the prompt), as the embedded backend decodes, so
that a constrained reply closes its structure; one sent without keeps max_tokens.
`constrain=False` sends no structure at all.

Robustness: every request has a timeout; connection errors, timeouts, 429 and 5xx are retried
`max_retries` times with exponential back-off and jitter (a numeric Retry-After is honoured, up
to 30 s). When the attempts run out, a server that never answered (or kept answering 429/502/
503/504) gives ServerUnreachableError; one that kept failing with another 5xx gives
ServerRejectedError with its message, as does any 4xx at once.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import random
import re
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from faithrag.errors import (
    ConfigError,
    ServerRejectedError,
    ServerUnreachableError,
)
from faithrag.llm.base import (
    ChoiceRequest,
    ChoiceScores,
    Completion,
    GenerationRequest,
    Message,
    TokenBias,
    decoding_cap,
)
from faithrag.llm.chat_encoding import common_prefix
from faithrag.llm.grammar import gbnf_for, gbnf_literal
from faithrag.llm.tokenizers import LocalTokenizer, load_tokenizer

LOGIT_BIAS_LIMIT = 100.0  # OpenAI and vLLM accept values in [-100, 100]
TOP_LOGPROBS = 20  # the most OpenAI and vLLM (default max_logprobs) return per position
# asked of a server that takes more (llama-cpp-python's sorts the whole vocabulary either way)
WIDE_TOP_LOGPROBS = 1000
# the most a choice probability under a bias may be off when its normaliser is bounded from top
# log-probs: a quarter of the 0.02 that server and embedded probabilities are held to
PROBABILITY_TOLERANCE = 0.005
MAX_BACKOFF = 30.0
# Approximate chat accounting when no template is available: per-message markup (role markers,
# separators) and boilerplate such as a default system prompt that some templates add
# (SmolLM2's and Qwen2.5's are about 20 tokens). Errs on the high side, as a context guard should.
APPROX_TOKENS_PER_MESSAGE = 8
APPROX_TOKENS_PER_CHAT = 32
# the ways of sending a request's structure, in the order tried: name -> the request fields
STRUCTURE_FORMS: dict[str, tuple[str, ...]] = {
    "schema": ("json_schema", "grammar", "json_object_schema"),
    "grammar": ("grammar",),
}
_log = logging.getLogger(__name__)
TOKENIZE_CACHE_SIZE = 8192  # texts (or id sequences) whose tokenization each backend keeps
# forced-token replies each backend keeps, by (prompt, token); each holds its position's top
# log-probs (up to WIDE_TOP_LOGPROBS, about 0.15 MB)
FORCED_CACHE_SIZE = 256
_PROBE_TEXT = "faithrag tokenizer probe: Paris, 1889 - naive cafe, 42 km/h."


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


def _error_message(response: httpx.Response) -> str:
    """The server's own explanation of a failed request, in the shapes servers use."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return str(error)[:500]
    return str(body)[:500]


def _server_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")


@dataclass(frozen=True)
class _ForcedReply:
    """A forced-token request's answer: the forced token's log-prob, the text the server gave
    it, and the position's top log-probs (text or "token_id:N" -> log-prob), all before the
    bias."""

    logprob: float
    token: str
    top: tuple[tuple[str, float], ...]


class _Flavor:
    """What the server's own tokenizer endpoints look like (probed once)."""

    VLLM = "vllm"  # POST /tokenize {prompt|messages} -> {tokens, count, max_model_len}
    LLAMA_SERVER = "llama-server"  # POST /tokenize {content} -> {tokens}; /apply-template
    LLAMA_CPP_PYTHON = "llama-cpp-python"  # POST /extras/tokenize {input} -> {tokens} (adds BOS)


class OpenAICompatLLM:
    """The LLM protocol against an OpenAI-compatible server.

    base_url: the API root including /v1, e.g. "http://127.0.0.1:8000/v1".
    model: the server's model name (sent as "model"; also this backend's `name`).
    tokenizer: "server", a preset name, a .gguf path or a tokenizer.json path (see module doc),
        or a LocalTokenizer.
    timeout: seconds per HTTP attempt (connecting is capped at 10 s).
    max_retries: extra attempts after a connection error, timeout, 429 or 5xx.
    concurrency: requests in flight at once in `generate`, `score_choices` and
        `score_choices_many`, so that an engine such as vLLM batches them; results keep the input
        order.
    logit_bias_cap: most entries sent in `logit_bias` (e.g. 300 for api.openai.com); None = all.
    context_window: used when the server does not report its own; when both are known the
        smaller one wins; with neither, a local GGUF tokenizer's trained context length.
    backoff: first retry delay in seconds (doubled each retry, with +-50 % jitter).
    transport: an httpx transport (tests use httpx.MockTransport).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        tokenizer: str | LocalTokenizer = "server",
        timeout: float = 120.0,
        max_retries: int = 3,
        concurrency: int = 4,
        logit_bias_cap: int | None = None,
        context_window: int | None = None,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        constrain: bool = True,
    ):
        if concurrency < 1 or max_retries < 0 or timeout <= 0:
            raise ConfigError(
                f"Bad OpenAI backend settings: concurrency={concurrency}, max_retries="
                f"{max_retries}, timeout={timeout}.",
                "concurrency >= 1, max_retries >= 0 and timeout > 0 are required.")
        self.name = model
        self.base_url = base_url.rstrip("/")
        self.root_url = _server_root(self.base_url)
        self._model = model
        self._timeout = timeout
        self._max_retries = max_retries
        self._concurrency = concurrency
        self._cap = logit_bias_cap
        self._configured_context = context_window
        self._backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            headers=headers,
            # no pool timeout: callers sharing the client queue for a connection, and that
            # wait is not the server's silence
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0), pool=None),
            limits=httpx.Limits(max_connections=concurrency + 2),
            transport=transport,
        )
        self._local = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
        self._lock = threading.Lock()
        self._scoring_lock = threading.Lock()
        self._fresh_lock = threading.Lock()  # a scoring request and those that prepare it
        self._primed_prompt: str | None = None  # the server holds this prompt but its last token
        self._flavor: str | None = None
        self._bos_prefix: list[int] = []  # what llama-cpp-python's /extras/tokenize prepends
        self._probed = False
        self._flavor_probed = False
        self._server_context: int | None = None
        self._server_vocab: int | None = None
        self._info_probed = False
        self._echo_usable: bool | None = None  # False once echoed log-probs proved unusable
        self._forced_usable: bool | None = None  # the forced-token probe's verdict, once
        self._grammar_runs = False  # (probe) a grammar forces a choice's tokens in one request
        self._raw_tops = False  # (probe) a forced reply's top log-probs are the unbiased ones
        self._top_n = TOP_LOGPROBS  # (probe) top log-probs asked per forced token
        self._tops_by_id = False  # (probe) top log-probs name token ids ("token_id:N")
        self._top_key_ids_table: dict[str, list[int]] | None = None  # token text -> ids
        # one tokenization per text and one piece per id: bounded caches shared by all callers
        self._tokenize_cached = functools.lru_cache(maxsize=TOKENIZE_CACHE_SIZE)(
            self._server_tokenize_uncached)
        self._detokenize_cached = functools.lru_cache(maxsize=TOKENIZE_CACHE_SIZE)(
            self._detokenize_uncached)
        # a token's log-prob after a prompt is asked once (scoring the same prompt under
        # several biases, as CSRAG's probe does, repeats every request)
        self._forced_cached = functools.lru_cache(maxsize=FORCED_CACHE_SIZE)(
            self._forced_reply)
        self._run_cached = functools.lru_cache(maxsize=FORCED_CACHE_SIZE)(self._grammar_run)
        self._pieces: dict[int, str] = {}  # single-id texts llama-server sent with its ids
        self.constrain = constrain
        self._refused_forms: set[str] = set()  # structure forms the server refused
        self._said: set[str] = set()  # warnings about structure already given once

    # ----------------------------------------------------------------- lifecycle
    def close(self) -> None:
        self._client.close()

    def forget_scores(self) -> None:
        """Drop the log-probs remembered from earlier choice scoring (forced tokens and grammar
        runs), so that the next scoring asks the server again; tokenizations and the
        capability probe's verdicts are kept."""
        self._forced_cached.cache_clear()
        self._run_cached.cache_clear()
        self._primed_prompt = None

    # ----------------------------------------------------------------- HTTP
    def _request(self, method: str, url: str, payload: dict[str, Any] | None = None) -> Any:
        if url.endswith("completions"):
            self._primed_prompt = None  # the server's prompt cache now holds something else
        attempts = self._max_retries + 1
        last, last_status, retry_after = "", 0, 0.0
        for attempt in range(attempts):
            if attempt:
                delay = self._backoff * 2 ** (attempt - 1) * (0.5 + random.random())
                time.sleep(min(MAX_BACKOFF, max(delay, retry_after)))
            try:
                response = self._client.request(method, url, json=payload)
            except httpx.TimeoutException:
                last, last_status, retry_after = f"no answer within {self._timeout:g} s", 0, 0.0
                continue
            except httpx.TransportError as exc:
                last, last_status, retry_after = f"connection failed: {exc}", 0, 0.0
                continue
            status = response.status_code
            if status == 429 or status >= 500:
                last, last_status = f"HTTP {status}: {_error_message(response)}", status
                header = response.headers.get("retry-after", "")
                retry_after = float(header) if header.replace(".", "", 1).isdigit() else 0.0
                continue
            if status >= 400:
                raise ServerRejectedError(
                    f"{url} rejected the request (HTTP {status}): {_error_message(response)}",
                    "The server does not accept a parameter or value this request used; see its "
                    "message (and its log).")
            try:
                return response.json()
            except ValueError as exc:
                raise ServerRejectedError(
                    f"{url} answered HTTP {status} with a body that is not JSON: "
                    f"{response.text[:200]!r}",
                    "Check that --base-url points at an OpenAI-compatible API (usually ending "
                    "in /v1).") from exc
        if last_status and last_status not in (429, 502, 503, 504):
            raise ServerRejectedError(
                f"{url} kept failing after {attempts} attempts (last: {last}).",
                "The server is up but fails on this request; see its log.")
        raise ServerUnreachableError(
            f"The server at {url} did not answer after {attempts} attempts (last: {last}).",
            "Start the server or check --base-url (and the timeout).")

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        """POST to the API; a (chat) completion request carries `_plain_decoding`'s settings."""
        if path.endswith("completions"):
            payload = {**self._plain_decoding(), **payload}
        return self._request("POST", self.base_url + path, payload)

    def _post_scoring(self, payload: dict[str, Any]) -> Any:
        """A /v1/completions request whose log-probs score options. llama.cpp's servers
        evaluate a prompt after the longest prefix it shares with what they hold from the
        previous request (always evaluating at least the prompt's last token), and log-probs
        read after such a prefix depend on how the prompt was split into batches, hence on what
        ran before (see docs/backends.md). There the server is first made to hold the prompt
        minus its last token, read from an empty cache (llama-server: that text with
        `cache_prompt` false; llama-cpp-python: a one-token request, then that text; each with
        max_tokens=1), so every scoring request on that prompt reads only its last token and
        the choice's: the split the embedded backend uses, and one evaluation of the prompt for
        all its choices. A prompt that cannot be cut as text before its last token is read
        whole from an empty cache instead. The requests go under one lock, and each
        `score_choices` call prepares the server anew; a request from another client during
        the call can still come between them and move its scores at the float level."""
        self._detect_flavor(tolerate_dead=True)
        if self._flavor not in (_Flavor.LLAMA_CPP_PYTHON, _Flavor.LLAMA_SERVER):
            return self._post("/completions", payload)
        prompt = payload["prompt"]
        with self._fresh_lock:
            primed = self._primed_prompt == prompt
            if not primed:
                head = self._head_text(prompt, self._tokenize_prompt(prompt))
                self._read_from_empty(head)
                primed = head is not None
            data = self._post("/completions", payload)
            self._primed_prompt = prompt if primed else None
            return data

    def _read_from_empty(self, text: str | None) -> None:
        """Leave one of llama.cpp's servers holding `text` read from an empty cache, or (None)
        holding nothing a prompt can share: llama-server reads it with `cache_prompt` false,
        llama-cpp-python after a one-token prompt; max_tokens=1, the token not read."""
        if self._flavor == _Flavor.LLAMA_SERVER:
            reads = [{"prompt": "\n" if text is None else text, "cache_prompt": False}]
        else:
            reads = [{"prompt": "\n"}] + ([] if text is None else [{"prompt": text}])
        for read in reads:
            self._post("/completions", {"model": self._model, "max_tokens": 1,
                                        "temperature": 0.0, **read})

    def _kept_prefix_text(self, request: GenerationRequest) -> str | None:
        """The rendered text of a `keep_prefix` request's recurring head (its leading messages
        and `cache_prefix_text`), which the embedded backend reads on its own before the rest
        of the prompt; None when the request keeps none, the server is not one of llama.cpp's
        (which read a prompt after what they hold), or the chat template is unknown."""
        if not request.keep_prefix:
            return None
        self._detect_flavor(tolerate_dead=True)
        if self._flavor not in (_Flavor.LLAMA_CPP_PYTHON, _Flavor.LLAMA_SERVER):
            return None
        recurring = list(request.messages[:request.cache_prefix])
        if request.cache_prefix_text:
            recurring.append(Message(request.messages[request.cache_prefix].role,
                                     request.cache_prefix_text))
        rendered = self._render_chat(request.messages)
        head = self._render_chat(recurring) if recurring else None
        if rendered is None or head is None:
            return None
        # the embedded backend keeps the tokens the head and the prompt share; their text is
        # the texts' common start when that tokenizes to the prompt's first tokens
        shared = os.path.commonprefix([rendered, head])
        kept, ids = self._tokenize_prompt(shared), self._tokenize_prompt(rendered)
        if not kept or len(kept) >= len(ids) or ids[:len(kept)] != kept \
                or len(kept) != common_prefix(self._tokenize_prompt(head), ids):
            return None
        return shared

    def _head_text(self, text: str, ids: list[int]) -> str | None:
        """The prefix of `text` that tokenizes to all of `ids` but the last, if there is one."""
        if len(ids) < 2:
            return None
        try:
            return self._text_before(text, ids, len(ids) - 1)
        except ServerRejectedError:
            return None

    def _plain_decoding(self) -> dict[str, float]:
        """Settings that switch off what an engine adds to plain decoding by default, so that
        greedy decoding picks the model's own argmax as the embedded backend does: the repeat
        penalty of llama.cpp's servers (llama-cpp-python defaults to 1.1) and the repetition
        penalty vLLM takes from a model's generation_config. Sent only to a recognised server
        (OpenAI refuses fields it does not know)."""
        self._detect_flavor(tolerate_dead=True)
        if self._flavor in (_Flavor.LLAMA_CPP_PYTHON, _Flavor.LLAMA_SERVER):
            return {"repeat_penalty": 1.0}
        if self._flavor == _Flavor.VLLM:
            return {"repetition_penalty": 1.0}
        return {}

    def _probe(self, method: str, url: str, payload: dict[str, Any] | None = None) -> Any:
        """A request for an optional endpoint: None when the server refuses it (4xx)."""
        try:
            return self._request(method, url, payload)
        except ServerRejectedError:
            return None

    # ----------------------------------------------------------------- server capabilities
    def _detect_flavor(self, tolerate_dead: bool = False) -> None:
        """Which server this is, from its tokenize endpoints (once; None when it has neither).
        A server that does not answer raises ServerUnreachableError, unless `tolerate_dead`:
        then the kind stays unknown and is asked again next time."""
        if self._flavor_probed:
            return
        with self._lock:
            if self._flavor_probed:
                return
            try:
                data = self._probe("POST", self.root_url + "/tokenize", {
                    "model": self._model, "prompt": _PROBE_TEXT, "add_special_tokens": False,
                    "content": _PROBE_TEXT, "add_special": False})
            except ServerUnreachableError:
                if tolerate_dead:  # the request at hand reports the dead server
                    return
                raise
            if isinstance(data, dict) and isinstance(data.get("tokens"), list):
                is_vllm = "count" in data or "max_model_len" in data
                self._flavor = _Flavor.VLLM if is_vllm else _Flavor.LLAMA_SERVER
                if data.get("max_model_len"):
                    self._server_context = int(data["max_model_len"])
            else:
                empty = self._probe("POST", self.root_url + "/extras/tokenize",
                                    {"model": self._model, "input": ""})
                if isinstance(empty, dict) and isinstance(empty.get("tokens"), list):
                    self._flavor = _Flavor.LLAMA_CPP_PYTHON
                    self._bos_prefix = [int(t) for t in empty["tokens"]]
            self._flavor_probed = True

    def _ensure_tokenizer(self) -> None:
        """Find the server's tokenize endpoint once; check a local tokenizer against it."""
        if self._probed:
            return
        self._detect_flavor()
        with self._lock:
            if self._probed:
                return
            if self._local is None and self._flavor is None:
                raise ConfigError(
                    f"The server at {self.root_url} has no tokenize endpoint (tried /tokenize "
                    "and /extras/tokenize), so tokenizer='server' cannot work.",
                    "Pass the tokenizer of the served model: tokenizer=<preset|model.gguf|"
                    "tokenizer.json>.")
            if self._local is not None and self._flavor is not None:
                local_ids = self._local.encode(_PROBE_TEXT, special=False)
                server_ids = self._server_tokenize(_PROBE_TEXT)
                if local_ids != server_ids:
                    raise ConfigError(
                        f"tokenizer '{self._local.name}' does not match the server's: "
                        f"{_PROBE_TEXT!r} -> {local_ids[:8]}... locally, {server_ids[:8]}... on "
                        "the server.",
                        "Use tokenizer='server' or the tokenizer of the model the server runs; "
                        "biased token ids would hit the wrong tokens.")
            self._probed = True

    def _ensure_info(self) -> None:
        """Context window and vocabulary size as the server reports them (once)."""
        if self._info_probed:
            return
        self._ensure_tokenizer()
        with self._lock:
            if self._info_probed:
                return
            models = self._probe("GET", self.base_url + "/models")
            entries = models.get("data", []) if isinstance(models, dict) else []
            entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == self._model),
                         entries[0] if len(entries) == 1 else None)
            if isinstance(entry, dict):
                if entry.get("max_model_len"):  # vLLM
                    self._server_context = int(entry["max_model_len"])
                meta = entry.get("meta")
                if isinstance(meta, dict) and meta.get("n_vocab"):  # llama-server
                    self._server_vocab = int(meta["n_vocab"])
            if self._flavor == _Flavor.LLAMA_SERVER:
                props = self._probe("GET", self.root_url + "/props")
                settings = props.get("default_generation_settings") if isinstance(props, dict) \
                    else None
                if isinstance(settings, dict) and settings.get("n_ctx"):
                    self._server_context = int(settings["n_ctx"])
            self._info_probed = True

    # ----------------------------------------------------------------- protocol: tokenizer
    @property
    def context_window(self) -> int:
        """The smaller of the server's own (llama-server /props, vLLM max_model_len) and the
        configured one; with neither, the local GGUF tokenizer's trained context length."""
        self._ensure_info()
        known = [n for n in (self._server_context, self._configured_context) if n]
        if known:
            return min(known)
        trained = getattr(self._local, "context_length", None)
        if trained:
            return int(trained)
        raise ConfigError(
            f"The server at {self.base_url} does not report its context window, and no local "
            "GGUF tokenizer says it.",
            "Pass --n-ctx (llm.n_ctx) with the value the server was started with.")

    @property
    def vocab_size(self) -> int:
        if self._local is not None:
            return self._local.vocab_size
        self._ensure_info()
        if self._server_vocab is None:
            raise ConfigError(
                f"The server at {self.base_url} does not report its vocabulary size.",
                "Pass the served model's tokenizer (tokenizer=<preset|model.gguf|tokenizer.json>).")
        return self._server_vocab

    def tokenize(self, text: str) -> list[int]:
        """Ids of `text` without BOS, control-token markup (e.g. "<|im_end|>") read as plain
        text, as local GGUF tokenizers and llama-server (asked to) read it. llama-cpp-python's
        server and vLLM have no switch for it and parse such markup into the control token."""
        self._ensure_tokenizer()
        if self._local is not None:
            return self._local.encode(text, special=False)
        return self._server_tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        """Text of `ids`; the server's answers are cached per id sequence (bounded)."""
        self._ensure_tokenizer()
        ids = tuple(int(i) for i in ids)
        if not ids:
            return ""
        if self._local is not None:
            return self._local.decode(ids)
        if len(ids) == 1 and ids[0] in self._pieces:
            return self._pieces[ids[0]]
        return self._detokenize_cached(ids)

    def _detokenize_uncached(self, ids: tuple[int, ...]) -> str:
        if self._flavor == _Flavor.LLAMA_CPP_PYTHON:
            return self._request("POST", self.root_url + "/extras/detokenize",
                                 {"model": self._model, "tokens": list(ids)})["text"]
        data = self._request("POST", self.root_url + "/detokenize",
                             {"model": self._model, "tokens": list(ids)})
        return data["prompt"] if self._flavor == _Flavor.VLLM else data["content"]

    def _server_tokenize(self, text: str, special: bool = False) -> list[int]:
        """Ids from the server's tokenizer, one request per distinct (text, special) while it
        stays in the cache; control-token markup ("<|im_end|>") in `text` is parsed only with
        `special` where the server lets us choose (llama-server; vLLM and llama-cpp-python's
        endpoints have no such switch)."""
        return list(self._tokenize_cached(text, special))

    def _server_tokenize_uncached(self, text: str, special: bool) -> tuple[int, ...]:
        if self._flavor == _Flavor.LLAMA_CPP_PYTHON:
            ids = self._request("POST", self.root_url + "/extras/tokenize",
                                {"model": self._model, "input": text})["tokens"]
            n = len(self._bos_prefix)
            return tuple(int(t) for t in (ids[n:] if ids[:n] == self._bos_prefix else ids))
        if self._flavor == _Flavor.VLLM:
            payload = {"model": self._model, "prompt": text, "add_special_tokens": False}
            return tuple(int(t) for t in
                         self._request("POST", self.root_url + "/tokenize", payload)["tokens"])
        # llama-server: the pieces come with the ids, so single-id detokenizing costs nothing
        payload = {"content": text, "add_special": False, "parse_special": special,
                   "with_pieces": True}
        tokens = self._request("POST", self.root_url + "/tokenize", payload)["tokens"]
        ids = []
        for token in tokens:
            if isinstance(token, dict):
                ids.append(int(token["id"]))
                if isinstance(token.get("piece"), str):
                    self._pieces[int(token["id"])] = token["piece"]
            else:
                ids.append(int(token))
        return tuple(ids)

    def _tokenize_prompt(self, text: str) -> list[int]:
        """Ids of a rendered prompt with control-token markup parsed, as the server reads it."""
        if self._local is not None:
            return self._local.encode(text, special=True)
        return self._server_tokenize(text, special=True)

    def _render_chat(self, messages: Sequence[Message]) -> str | None:
        """The prompt text the server builds from `messages`, when we can know it."""
        self._ensure_tokenizer()
        if self._local is not None:
            rendered = self._local.render_chat(messages)
            if rendered is not None:
                return rendered
        if self._flavor == _Flavor.LLAMA_SERVER:
            data = self._probe("POST", self.root_url + "/apply-template",
                               {"messages": _messages_json(messages)})
            if isinstance(data, dict) and isinstance(data.get("prompt"), str):
                return data["prompt"]
        return None

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        """Exact when the chat template is known (a local GGUF's template, vLLM's /tokenize with
        messages, llama-server's /apply-template); otherwise an estimate: content tokens +
        APPROX_TOKENS_PER_MESSAGE per message + APPROX_TOKENS_PER_CHAT, meant to err high."""
        self._ensure_tokenizer()
        if self._local is None and self._flavor == _Flavor.VLLM:
            data = self._request("POST", self.root_url + "/tokenize", {
                "model": self._model, "messages": _messages_json(messages),
                "add_generation_prompt": True})
            return len(data["tokens"])
        rendered = self._render_chat(messages)
        if rendered is not None:
            return len(self._tokenize_prompt(rendered))
        return (sum(len(self.tokenize(m.content)) + APPROX_TOKENS_PER_MESSAGE for m in messages)
                + APPROX_TOKENS_PER_CHAT)

    def check_answer_scoring(self, stage: str) -> None:
        """ConfigError naming `stage` when this backend cannot score options after a partial
        answer (a ChoiceRequest with an answer_prefix), as choice_scoring, csrag_choices,
        csrag_json_scored and cot_json_scored do: that needs the served model's chat template,
        which tokenizer='server' gets only from llama-server's /apply-template. Costs the
        tokenizer probe (made once) and, on llama-server, one template request."""
        probe = (Message("user", "q"),)
        if self._render_chat(probe) is None:
            raise ConfigError(
                f"Stage '{stage}' scores answer options after a partial answer, which needs "
                f"the served model's chat template, and {self.root_url} with tokenizer="
                f"'{self._local.name if self._local else 'server'}' gives none.",
                "Pass the served model's GGUF or preset as --tokenizer (llm.tokenizer).")

    # ----------------------------------------------------------------- protocol: generation
    def _map(self, fn, items: list) -> list:
        if len(items) <= 1 or self._concurrency == 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self._concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """One chat completion per request, `concurrency` in flight at once, in input order."""
        return self._map(self._generate_one, list(requests))

    def _generate_one(self, request: GenerationRequest) -> Completion:
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": _messages_json(request.messages),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        if request.stop:
            payload["stop"] = list(request.stop)
        warnings: list[str] = []
        if request.bias:
            payload["logit_bias"], warnings = logit_bias_payload(request.bias, self._cap)
        if request.logprobs:
            # llama-cpp-python returns no log-probs unless top_logprobs is set as well
            payload["logprobs"], payload["top_logprobs"] = True, 0
        start = time.perf_counter()
        kept = self._kept_prefix_text(request)
        if kept is None:
            data, constrained = self._post_structured(payload, request, warnings)
        else:  # read the kept head on its own first, as the embedded backend does
            with self._fresh_lock:
                self._read_from_empty(kept)
                data, constrained = self._post_structured(payload, request, warnings)
        seconds = time.perf_counter() - start
        choice = _first_choice(data, self.base_url + "/chat/completions")
        text = (choice.get("message") or {}).get("content") or ""
        if constrained and request.schema is not None and not _may_be_schema_reply(
                text, choice.get("finish_reason"), request.stop):
            self._say_once("ignored", warnings, "the server's reply to a JSON schema is not "
                           "JSON: it may ignore response_format; replies are read tolerantly")

        token_logprobs = None
        if request.logprobs:
            content = (choice.get("logprobs") or {}).get("content")
            if content is None:
                warnings.append("the server returned no log-probs")
            else:
                token_logprobs = [float(t["logprob"]) for t in content]
        usage = data.get("usage") or {}
        prompt_tokens, completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if prompt_tokens is None or completion_tokens is None:
            warnings.append("the server reported no token usage; counts are estimates")
            try:
                estimated = self.count_chat_tokens(request.messages), len(self.tokenize(text))
            except ConfigError:  # no tokenizer to count with: the answer still counts
                estimated = (sum(len(m.content) for m in request.messages) // 4, len(text) // 4)
            prompt_tokens = estimated[0] if prompt_tokens is None else prompt_tokens
            completion_tokens = estimated[1] if completion_tokens is None else completion_tokens
        return Completion(
            text=text,
            prompt_tokens=int(prompt_tokens),
            completion_tokens=int(completion_tokens),
            finish_reason=choice.get("finish_reason") or "stop",
            seconds=seconds,
            token_logprobs=token_logprobs,
            warnings=warnings,
        )

    def _post_structured(self, payload: dict[str, Any], request: GenerationRequest,
                         warnings: list[str]) -> tuple[Any, bool]:
        """The chat completion with the request's structure in the first form the server takes
        (see the module docstring), and whether it went constrained."""
        if not (self.constrain and request.structured):
            return self._post("/chat/completions", payload), False
        kind = "schema" if request.schema is not None else "grammar"
        refused: list[tuple[str, ServerRejectedError]] = []
        constrained = None  # the payload with a constrained reply's token cap, once needed
        for form in STRUCTURE_FORMS[kind]:
            if form in self._refused_forms:
                continue
            fields = _structure_fields(form, request)
            if fields is None:  # this form cannot carry this request's structure
                continue
            if constrained is None:
                constrained = {**payload, "max_tokens": self._constrained_cap(request)}
            try:
                data = self._post("/chat/completions", {**constrained, **fields})
            except ServerRejectedError as exc:
                refused.append((form, exc))
                continue
            self._refused_forms.update(f for f, _ in refused)  # a later form was taken
            return data, True
        data = self._post("/chat/completions", payload)  # fails alone: not the structure's fault
        self._refused_forms.update(form for form, _ in refused)
        if set(STRUCTURE_FORMS[kind]) <= self._refused_forms:
            reason = f" ({refused[-1][1].message})" if refused else ""
            self._say_once(kind, warnings, f"the server refused the request's {kind}{reason}; "
                           f"{kind} requests go unconstrained from now on")
        else:  # forms are left, but none could carry this schema
            self._say_once("uncarried", warnings, "a schema went unconstrained: the server "
                           "refused response_format json_schema, and the forms left cannot carry "
                           "it (a grammar needs llama-cpp-python here: pip install "
                           "'faithrag[llamacpp]'; llama-cpp-python's json_object form cannot "
                           "hold enum or const strings with quotes or backslashes)")
        return data, False

    def _constrained_cap(self, request: GenerationRequest) -> int:
        """`decoding_cap` for `request` sent with its structure: the room the context window
        leaves after the prompt (counted as `count_chat_tokens` counts it); max_tokens when the
        window or the prompt's size cannot be known here."""
        try:
            room = self.context_window - self.count_chat_tokens(request.messages)
        except ConfigError:
            return request.max_tokens
        return decoding_cap(request, True, room)

    def _say_once(self, topic: str, warnings: list[str], message: str) -> None:
        with self._lock:
            if topic in self._said:
                return
            self._said.add(topic)
        warnings.append(message)
        _log.warning("%s: %s", self.base_url, message)

    # ----------------------------------------------------------------- protocol: choices
    def score_choices_many(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceScores]:
        """`score_choices` of each request, `concurrency` in flight at once, in input order (an
        engine with prefix caching then reads a shared prompt prefix once)."""
        return self._map(self.score_choices, list(requests))

    def score_choices(self, request: ChoiceRequest) -> ChoiceScores:
        """Log-probability of each choice as the start of the assistant's answer, bias applied;
        exact, or a ServerRejectedError ("Could not score the choices ...") says why not.
        Probabilities are never made up from log-probs the server did not give.

        The choices' tokens are those of the rendered prompt + answer_prefix + choice after its
        common prefix with the prompt (a token merged across the boundary is the choice's) when
        the chat template is known (local GGUF, llama-server's /apply-template); otherwise, with
        no answer_prefix, the choice tokenized alone.

        Servers report log-probs before `logit_bias`; the bias's value for each scored token is
        added here, and its normaliser at that position, log Z = log sum_v p(v) exp(b_v), is
        subtracted where it differs between choices. A position after the same prompt text in
        every choice (the first one, when all choices start at the same token) has one
        normaliser for all: it cancels in `probabilities()` and is left out, so under a bias the
        log-probs are those of the choices up to a term common to all of them (differences,
        `best` and `probabilities()` are exact; an absolute value is not a log-probability).
        Any other position's log Z is bounded from its forced reply's top log-probs (the
        `_top_n` the probe found the server returns: WIDE_TOP_LOGPROBS, else TOP_LOGPROBS):
        a listed token's probability is known, one not listed is at most the smallest listed,
        and all unlisted ones together at most the rest of the mass (`log_normaliser_bounds`);
        a biased token listed under a text several tokens share (byte fragments) is asked on
        its own. The choices get the middle of their bounds, and the result's
        `probability_error` the most a probability can then be off (also in `warnings`); above
        PROBABILITY_TOLERANCE the choices are refused, naming the bound reached. Token ids of
        listed texts come from a table of every token's text, built once from the local
        tokenizer (vLLM lists ids); with tokenizer='server' on a server that lists texts only
        the forced tokens are known, which is seldom enough.

        (forced) With the chat template, when the capability probe (once per backend) finds
        that the server reports a token forced by `logit_bias` +100 with its own log-prob:
            each choice token is one /v1/completions request (max_tokens=1) on the prompt text
            that precedes it, the token forced; the reply must name that token, and the prompt
            text must tokenize to the ids before it. Exact on any such server (llama-cpp-python;
            vLLM, whose log-probs are the model's own by default); under a bias, exact or
            bounded as above. When the probe also finds that a GBNF `grammar` forces a token
            and leaves its log-prob as the model's own (llama-cpp-python), a choice of several
            tokens is first asked in one request whose grammar admits only its text (its tokens
            favoured by `logit_bias` among the spellings the grammar admits); the tokens the
            server generated must be the choice's, else each is asked on its own.
        (first token) Otherwise, when each choice is one distinct token at the same position:
            one request with the top 20 log-probs (chat completion without answer_prefix, else
            /v1/completions on the rendered prompt); every choice must be among them.
        (echo) Otherwise, with the chat template: /v1/completions with echo=true on prompt +
            choice, one request per choice; refused when the server's prompt log-probs are
            missing or misaligned (llama-server, OpenAI; llama-cpp-python without BOS).
        Without forced-token scoring, a bias on choices other than one token each at one
        position is refused.
        """
        if not request.choices or any(not c for c in request.choices):
            raise ValueError("score_choices needs at least one choice and no empty choices")
        start = time.perf_counter()
        self._primed_prompt = None  # another client may have used the server since the last call
        bias = request.bias.as_dict() if request.bias else {}
        rendered = self._render_chat(request.messages)
        if rendered is None:
            if request.answer_prefix:
                raise ConfigError(
                    "Could not score the choices: they follow an answer_prefix, and the chat "
                    "template of the served model is unknown (tokenizer='server' on a server "
                    "without a template endpoint), so the prompt cannot be continued.",
                    "Pass the served model's GGUF or preset as --tokenizer (llm.tokenizer).")
            scores = self._score_by_chat(request, bias)
        else:
            context = rendered + request.answer_prefix
            context_ids = self._tokenize_prompt(context)
            fulls = [self._tokenize_prompt(context + c) for c in request.choices]
            starts = [common_prefix(context_ids, f) for f in fulls]
            if any(s == len(f) for s, f in zip(starts, fulls)):
                raise ServerRejectedError(
                    "Could not score the choices: a choice adds no token to the prompt.",
                    "Use choices that are text of their own.")
            one_position = (len(set(starts)) == 1
                            and all(len(f) - s == 1 for s, f in zip(starts, fulls)))
            if self._forced_scoring_usable():
                scores = self._score_forced(request, context, fulls, starts, bias)
            elif bias and not one_position:
                raise ServerRejectedError(
                    "Could not score the choices exactly: under a logit bias, choices of "
                    "several tokens (or starting at different positions) need each position's "
                    "normaliser, and this server does not report the log-probs of tokens forced "
                    "by logit_bias (the capability probe failed).",
                    "Score these choices with the embedded backend (--llm llamacpp), or serve "
                    "the model with llama-cpp-python's server (python -m llama_cpp.server).")
            elif one_position and starts[0] == len(context_ids) \
                    and len({f[-1] for f in fulls}) == len(fulls):
                scores = self._score_first_tokens(request, [f[-1] for f in fulls], bias,
                                                  context)
            else:
                scores = self._score_by_echo(request, context,
                                             [f[s:] for s, f in zip(starts, fulls)], bias)
            scores.prompt_tokens = scores.prompt_tokens or len(context_ids)
        scores.seconds = time.perf_counter() - start
        return scores

    # ----------------------------------------------------------------- choices: forced tokens
    def _forced_scoring_usable(self) -> bool:
        """The capability probe, made once: does the server report a token forced by
        `logit_bias` with the log-prob the model gives it without the bias?"""
        if self._forced_usable is None:
            self._ensure_tokenizer()
            with self._scoring_lock:
                if self._forced_usable is None:
                    self._forced_usable = self._probe_forced_scoring()
        return self._forced_usable

    def _probe_forced_scoring(self) -> bool:
        """Ask for the top log-probs after a fixed text, force a runner-up, compare: the forced
        token must come back with its unforced log-prob. Also records whether the forced
        reply's top log-probs are the unforced ones (`_raw_tops`: a bias's normaliser can be
        bounded from them) and how many the server returns (`_top_n`). The requests are sent as
        scoring requests are (`_post_scoring`), so all of them read the probe text alike."""
        payload: dict[str, Any] = {"model": self._model, "prompt": _PROBE_TEXT,
                                   "max_tokens": 1, "temperature": 0.0, "logprobs": 5}
        try:
            data = self._probe_scoring(payload)
            if data is None:
                return False
            tops = _completion_logprobs(data, self.base_url + "/completions").get(
                "top_logprobs") or []
            unforced = {str(k): float(v) for k, v in (tops[0] or {}).items()} if tops else {}
            self._tops_by_id = any(k.startswith("token_id:") for k in unforced)
            ranked = sorted(unforced.items(), key=lambda e: -e[1])
            for key, logprob in ranked[1:]:
                ids = self._top_key_ids(key) if key.startswith("token_id:") else self.tokenize(key)
                if ids is None or len(ids) != 1:
                    continue
                text = self.detokenize(ids)
                forced = self._probe_scoring({
                    **payload, "logit_bias": {str(ids[0]): LOGIT_BIAS_LIMIT}})
                reply = None if forced is None else self._read_forced(forced, ids[0])
                if reply is None or abs(reply.logprob - logprob) >= 1e-3:
                    return False
                seen = dict(reply.top)
                self._raw_tops = all(abs(seen.get(k, math.inf) - v) < 1e-3
                                     for k, v in unforced.items())
                self._top_n = self._widest_top_logprobs(payload)
                run = self._probe_scoring({
                    **payload, "grammar": "root ::= " + gbnf_literal(text)})
                run_reply = None if run is None else self._read_forced(run, ids[0])
                self._grammar_runs = (run_reply is not None
                                      and abs(run_reply.logprob - logprob) < 1e-3)
                return True
        except (ServerRejectedError, ConfigError, KeyError, TypeError, ValueError,
                AttributeError):
            return False
        return False

    def _probe_scoring(self, payload: dict[str, Any]) -> Any:
        """`_post_scoring`, or None when the server refuses the request (4xx)."""
        try:
            return self._post_scoring(payload)
        except ServerRejectedError:
            return None

    def _widest_top_logprobs(self, payload: dict[str, Any]) -> int:
        """WIDE_TOP_LOGPROBS when the server returns more than TOP_LOGPROBS top log-probs per
        position (llama-cpp-python; vLLM started with a larger --max-logprobs), else
        TOP_LOGPROBS (vLLM's default cap refuses more)."""
        data = self._probe_scoring({**payload, "logprobs": WIDE_TOP_LOGPROBS})
        try:
            tops = _completion_logprobs(data, self.base_url + "/completions").get(
                "top_logprobs") or [{}]
            wide = len(tops[0] or {}) > TOP_LOGPROBS + 1
        except (ServerRejectedError, AttributeError, TypeError):
            wide = False
        return WIDE_TOP_LOGPROBS if wide else TOP_LOGPROBS

    def _read_forced(self, data: Any, token: int) -> _ForcedReply | None:
        """The reply to a forced-token request, if its one generated token is `token`."""
        replies = self._read_run(data, (token,))
        return None if replies is None else replies[0]

    def _read_run(self, data: Any, tokens: Sequence[int]) -> tuple[_ForcedReply, ...] | None:
        """The reply to a request that forced `tokens`, one per generated token, if the server
        generated exactly those tokens."""
        logprobs = _completion_logprobs(data, self.base_url + "/completions")
        texts, values = logprobs.get("tokens") or [], logprobs.get("token_logprobs") or []
        if len(texts) != len(tokens) or len(values) != len(tokens) or None in values:
            return None
        for text, token in zip(texts, tokens):
            piece = self.detokenize([token]).replace("\ufffd", "")
            if text not in (f"token_id:{token}", piece) and text.replace("\ufffd", "") != piece:
                return None
        tops = list(logprobs.get("top_logprobs") or [])
        tops += [None] * (len(tokens) - len(tops))
        return tuple(
            _ForcedReply(float(value), str(text), tuple(
                (str(k), float(v)) for k, v in (top if isinstance(top, dict) else {}).items()
                if v is not None))
            for text, value, top in zip(texts, values, tops))

    def _score_forced(self, request: ChoiceRequest, context: str, fulls: list[list[int]],
                      starts: list[int], bias: dict[int, float]) -> ChoiceScores:
        """Each choice token's log-prob from one request that forces it after the prompt text
        before it (a request shared by choices with a common start, or made before with the
        same prompt, is sent once), plus the bias's value for it. Under a bias, a position
        after the same prompt text in every choice has one normaliser, which cancels in the
        probabilities; any other position's is bounded (`_bound_normalisers`)."""
        steps = []
        for choice, full, own in zip(request.choices, fulls, starts):
            text = context + choice
            steps.append([(self._text_before(text, full, k), full[k])
                          for k in range(own, len(full))])
        replies: dict[tuple[str, int], _ForcedReply] = {}
        if self._grammar_runs:  # a choice of several tokens in one request, when spelled alike
            several = [choice_steps for choice_steps in steps if len(choice_steps) > 1]
            runs = self._map(lambda c: self._run_cached(c[0][0], tuple(t for _, t in c)), several)
            for choice_steps, run in zip(several, runs):
                if run is not None:
                    replies.update(zip(choice_steps, run))
        unique = list(dict.fromkeys(step for choice_steps in steps for step in choice_steps))
        asked = [step for step in unique if step not in replies]
        replies.update(zip(asked, self._map(lambda step: self._forced_cached(*step), asked)))
        scores = ChoiceScores(
            choices=tuple(request.choices),
            logprobs=[sum(replies[s].logprob + bias.get(s[1], 0.0) for s in choice_steps)
                      for choice_steps in steps],
            token_counts=[len(choice_steps) for choice_steps in steps],
            prompt_tokens=0,
            seconds=0.0,
        )
        prompts = [{prompt for prompt, _ in choice_steps} for choice_steps in steps]
        shared = set.intersection(*prompts)
        unshared = {step[0]: (step[1], replies[step]) for step in unique if step[0] not in shared}
        if bias and unshared:
            self._bound_normalisers(scores, prompts, unshared, bias)
        return scores

    def _bound_normalisers(self, scores: ChoiceScores, prompts: list[set[str]],
                           unshared: dict[str, tuple[int, _ForcedReply]],
                           bias: dict[int, float]) -> None:
        """Subtract from each choice's score the bias's log-normaliser at its positions that not
        every choice has (`unshared`: prompt text -> a forced token and its reply), each taken
        as the middle of its bounds from the reply's top log-probs; set
        `scores.probability_error`, or refuse when it exceeds PROBABILITY_TOLERANCE."""
        if not self._raw_tops:
            raise ServerRejectedError(
                "Could not score the choices exactly: under a logit bias, choices of several "
                "tokens need each position's normaliser, and the top log-probs this server "
                "returns with a forced token are not the model's own.",
                "Score these choices with the embedded backend (--llm llamacpp).")
        known = {prompt: self._known_probabilities(token, reply)
                 for prompt, (token, reply) in unshared.items()}
        # a biased token listed under a text that several tokens share: asked on its own
        shared_text = [(prompt, v) for prompt, (_, reply) in unshared.items()
                       for v in self._listed_under_shared_text(reply, bias, known[prompt])]
        for (prompt, v), reply in zip(shared_text, self._map(
                lambda step: self._forced_cached(*step), shared_text)):
            known[prompt][v] = math.exp(reply.logprob)
        bounds = {prompt: self._log_normaliser_bounds(reply, bias, known[prompt])
                  for prompt, (_, reply) in unshared.items()}
        lows = [lp - sum(bounds[p][1] for p in ps if p in bounds)
                for lp, ps in zip(scores.logprobs, prompts)]
        highs = [lp - sum(bounds[p][0] for p in ps if p in bounds)
                 for lp, ps in zip(scores.logprobs, prompts)]
        middles = [(low + high) / 2 for low, high in zip(lows, highs)]
        error = 0.0 if lows == highs else probability_error(lows, highs, middles)
        where = (f"the bias's normaliser at {len(bounds)} position(s), bounded from the "
                 f"server's top {self._top_n} log-probs at each")
        if error > PROBABILITY_TOLERANCE:
            wider = "" if self._top_n >= WIDE_TOP_LOGPROBS else (
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

    def _known_probabilities(self, token: int, reply: _ForcedReply) -> dict[int, float]:
        """Token -> probability for the forced token and each top log-prob whose text names
        one token only."""
        known = {token: math.exp(reply.logprob)}
        for key, logprob in reply.top:
            ids = self._top_key_ids(key)
            if ids is not None and len(ids) == 1:
                known.setdefault(ids[0], math.exp(logprob))
        return known

    def _listed_under_shared_text(self, reply: _ForcedReply, bias: dict[int, float],
                                  known: dict[int, float]) -> list[int]:
        """Biased tokens of unknown probability whose text is among the top log-probs' (a text
        that several tokens share, so the listed value may be another token's)."""
        shown = {key.replace("\ufffd", "") for key, _ in reply.top}
        return [v for v in bias if v not in known and self._top_key(v) in shown]

    def _log_normaliser_bounds(self, reply: _ForcedReply, bias: dict[int, float],
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
                key = self._top_key(v)
                caps[v] = free if key is None or key in shown else below_top
        return log_normaliser_bounds(bias, known, free, caps)

    def _top_key(self, token: int) -> str | None:
        """The text under which the server lists `token` among top log-probs (vLLM:
        "token_id:N", as is a llama-server's that lists ids, once read by
        `_completion_logprobs`; else the token's text, from a local tokenizer only), or None."""
        if self._flavor == _Flavor.VLLM or self._tops_by_id:
            return f"token_id:{token}"
        if self._local is None:
            return None
        return self._local.decode([token]).replace("\ufffd", "")

    def _top_key_ids(self, key: str) -> list[int] | None:
        """The tokens a top log-prob's text may stand for (None: unknown). Text keys are
        resolved with a table of every token's text, built once from the local tokenizer."""
        if key.startswith("token_id:") and key[len("token_id:"):].isdigit():
            return [int(key[len("token_id:"):])]
        if self._local is None:
            return None
        if self._top_key_ids_table is None:
            with self._scoring_lock:
                if self._top_key_ids_table is None:
                    table: dict[str, list[int]] = {}
                    for i in range(self._local.vocab_size):
                        table.setdefault(self._local.decode([i]).replace("\ufffd", ""),
                                         []).append(i)
                    self._top_key_ids_table = table
        return self._top_key_ids_table.get(key.replace("\ufffd", ""), [])

    def _text_before(self, text: str, ids: list[int], k: int) -> str:
        """The prefix of `text` that tokenizes to `ids[:k]` (`ids` are the tokens of `text`)."""
        tail = self.detokenize(ids[k:])
        head = text[:len(text) - len(tail)] if tail and text.endswith(tail) else None
        if head is None or self._tokenize_prompt(head) != ids[:k]:
            raise ServerRejectedError(
                f"Could not score the choices: the prompt cannot be cut as text before its "
                f"token {k} ({tail[:20]!r}), so that token cannot be scored on its own.",
                "Score these choices with the embedded backend (--llm llamacpp).")
        return head

    def _grammar_run(self, prompt: str, tokens: tuple[int, ...]) -> tuple[_ForcedReply, ...] | None:
        """One /v1/completions request on `prompt` whose grammar admits only the text of
        `tokens`, and `logit_bias` favours those tokens among the spellings the grammar admits:
        each token's log-prob and its position's top `_top_n` log-probs, before the grammar and
        the bias; None when the server spelled that text with other tokens."""
        payload: dict[str, Any] = {
            "model": self._model, "prompt": prompt, "max_tokens": len(tokens),
            "temperature": 0.0, "logprobs": self._top_n,
            "grammar": "root ::= " + gbnf_literal(self.detokenize(list(tokens))),
            "logit_bias": {str(t): LOGIT_BIAS_LIMIT for t in dict.fromkeys(tokens)}}
        return self._read_run(self._post_scoring(payload), tokens)

    def _forced_reply(self, prompt: str, token: int) -> _ForcedReply:
        """One /v1/completions request on `prompt` with `token` forced by logit_bias: its
        log-prob and the top `_top_n` log-probs of that position, both before the bias."""
        payload: dict[str, Any] = {
            "model": self._model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0,
            "logprobs": self._top_n, "logit_bias": {str(token): LOGIT_BIAS_LIMIT}}
        if self._flavor == _Flavor.VLLM:
            payload["return_tokens_as_token_ids"] = True  # "token_id:123" instead of text
        reply = self._read_forced(self._post_scoring(payload), token)
        if reply is None:
            raise ServerRejectedError(
                f"Could not score the choices: {self.base_url}/completions did not return the "
                f"log-prob of token {token} forced with logit_bias.",
                "Check the server's log; the embedded backend (--llm llamacpp) scores choices "
                "exactly.")
        return reply

    # ----------------------------------------------------------------- choices: other ways
    def _score_by_chat(self, request: ChoiceRequest, bias: dict[int, float]) -> ChoiceScores:
        """No chat template: the choices' first tokens (each choice tokenized alone) from the
        top log-probs of one chat completion; they must be distinct and all present."""
        firsts = [self.tokenize(c)[:1] for c in request.choices]
        if [] in firsts or len({f[0] for f in firsts}) != len(firsts):
            raise ServerRejectedError(
                "Could not score the choices: they share their first token, so each needs its "
                "own prompt log-probs, and the chat template of the server is unknown.",
                "Pass the served model's GGUF or preset as --tokenizer (llm.tokenizer), or "
                "use choices with distinct first tokens.")
        multi = [c for c in request.choices if len(self.tokenize(c)) > 1]
        if multi:
            raise ServerRejectedError(
                f"Could not score the choices exactly: {multi} have several tokens, and "
                "without the chat template only first tokens can be scored.",
                "Pass the served model's GGUF or preset as --tokenizer (llm.tokenizer).")
        return self._score_first_tokens(request, [f[0] for f in firsts], bias, None)

    def _score_first_tokens(self, request: ChoiceRequest, firsts: list[int],
                            bias: dict[int, float], context: str | None) -> ChoiceScores:
        """First-token log-probs from one request: chat completion when there is no
        answer_prefix, else /v1/completions on the rendered prompt + answer_prefix."""
        payload: dict[str, Any] = {"model": self._model, "max_tokens": 1, "temperature": 0.0}
        if self._flavor == _Flavor.VLLM:
            payload["return_tokens_as_token_ids"] = True  # "token_id:123" instead of text
        if request.answer_prefix:
            payload.update(prompt=context, logprobs=TOP_LOGPROBS)
            data = self._post("/completions", payload)
            logprobs = _completion_logprobs(data, self.base_url + "/completions")
            tops = logprobs.get("top_logprobs") or []
            top = dict(tops[0]) if tops and tops[0] else {}
        else:
            payload.update(messages=_messages_json(request.messages), logprobs=True,
                           top_logprobs=TOP_LOGPROBS)
            data = self._post("/chat/completions", payload)
            content = (_first_choice(data, self.base_url + "/chat/completions").get("logprobs")
                       or {}).get("content") or []
            top = {e["token"]: e["logprob"] for e in content[0].get("top_logprobs") or []} \
                if content else {}
        if not top:
            raise ServerRejectedError(
                f"Could not score the choices: {self.base_url} returned no log-probs for a "
                "request that asked for them.",
                "Use a server that returns log-probs (llama-cpp-python needs logits_all, which "
                "its server enables by default).")
        by_id = {int(t[len("token_id:"):]): float(lp) for t, lp in top.items()
                 if t.startswith("token_id:")}
        found = [by_id.get(token) if by_id else top.get(self.detokenize([token]))
                 for token in firsts]
        missing = [c for c, lp in zip(request.choices, found) if lp is None]
        if missing:
            raise ServerRejectedError(
                f"Could not score the choices: the first token of {missing} is not among the "
                f"server's top {TOP_LOGPROBS} log-probs, and this server offers no exact way "
                "to score it (no forced-token log-probs).",
                "Use a server that reports log-probs of tokens forced by logit_bias "
                "(llama-cpp-python, vLLM) with the served model's GGUF as --tokenizer, or the "
                "embedded backend (--llm llamacpp).")
        logprobs = [float(lp) + bias.get(token, 0.0) for lp, token in zip(found, firsts)]
        usage = data.get("usage") or {}
        return ChoiceScores(
            choices=tuple(request.choices),
            logprobs=logprobs,
            token_counts=[1] * len(firsts),
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            seconds=0.0,
        )

    def _score_by_echo(self, request: ChoiceRequest, context: str, targets: list[list[int]],
                       bias: dict[int, float]) -> ChoiceScores:
        """Each choice's own tokens (`targets`, the last tokens of context + choice) scored
        from the echoed prompt log-probs. The one generated token is forced (logit_bias +100 on
        the choice's first token) so that its echo entry can be checked: it must come last,
        after the prompt's entries, or the entries are misaligned."""
        if self._echo_usable is False:
            raise _echo_unusable_error(self.base_url)

        def score(job: tuple[str, list[int]]) -> tuple[float, int, int]:
            choice, own = job
            forced = own[0]
            data = self._post("/completions", {
                "model": self._model, "prompt": context + choice, "max_tokens": 1,
                "temperature": 0.0, "echo": True, "logprobs": 0,
                "logit_bias": {str(forced): LOGIT_BIAS_LIMIT}})
            logprobs = _completion_logprobs(data, self.base_url + "/completions")
            tokens = logprobs.get("tokens") or []
            values = logprobs.get("token_logprobs") or []
            usage = data.get("usage") or {}
            aligned = (usage.get("completion_tokens") == 1 and len(values) == len(tokens)
                       and len(values) > len(own) and tokens[-1] in
                       (f"token_id:{forced}", self.detokenize([forced])))
            own_values = values[-1 - len(own):-1] if aligned else []
            if not aligned or any(v is None for v in own_values):
                self._echo_usable = False  # no use asking again
                raise _echo_unusable_error(self.base_url)
            total = sum(float(v) + bias.get(t, 0.0) for v, t in zip(own_values, own))
            return total, len(own), int(usage.get("prompt_tokens", 0)) - len(own)

        results = self._map(score, list(zip(request.choices, targets)))
        return ChoiceScores(
            choices=tuple(request.choices),
            logprobs=[r[0] for r in results],
            token_counts=[r[1] for r in results],
            prompt_tokens=results[0][2],
            seconds=0.0,
        )


def _echo_unusable_error(url: str) -> ServerRejectedError:
    return ServerRejectedError(
        f"Could not score the choices: {url}/completions did not return usable prompt log-probs "
        "for echo=true: missing (llama-server, OpenAI) or misaligned (llama-cpp-python when the "
        "prompt does not start with the BOS token).",
        "Use a server that reports log-probs of tokens forced by logit_bias (llama-cpp-python, "
        "vLLM), or the embedded backend (--llm llamacpp).")


def _structure_fields(form: str, request: GenerationRequest) -> dict[str, Any] | None:
    """The request fields that carry `request`'s structure in `form` (see STRUCTURE_FORMS), or
    None when that form cannot carry it: a schema as `grammar` without llama-cpp-python here to
    compile it, or as llama-cpp-python's json_object when its converter would miswrite it."""
    schema = dict(request.schema or {})
    if form == "json_schema":
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": re.sub(r"[^A-Za-z0-9_-]", "_", request.purpose) or "reply", "schema": schema,
            "strict": True}}}
    if form == "json_object_schema":
        if _has_constant_with_quote_or_backslash(schema):
            return None
        return {"response_format": {"type": "json_object", "schema": schema}}
    if request.grammar is not None:
        return {"grammar": request.grammar, "guided_grammar": request.grammar}
    grammar = _schema_gbnf(json.dumps(schema))  # key order kept: it orders the properties
    return None if grammar is None else {"grammar": grammar}


@functools.lru_cache(maxsize=256)
def _schema_gbnf(schema_json: str) -> str | None:
    """The GBNF of a JSON schema (as `gbnf_for` on the embedded backend), or None when
    llama-cpp-python, whose converter it uses, is not installed."""
    try:
        return gbnf_for(json.loads(schema_json), None)
    except ImportError:
        return None


def _has_constant_with_quote_or_backslash(value: Any) -> bool:
    """Whether a schema holds an `enum` or `const` string with a quote or backslash (which
    llama-cpp-python's converter writes into GBNF literals unescaped)."""
    if isinstance(value, dict):
        constants = list(value.get("enum") or []) + ([value["const"]] if "const" in value else [])
        return (any(isinstance(c, str) and ('"' in c or "\\" in c) for c in constants)
                or any(_has_constant_with_quote_or_backslash(v) for v in value.values()))
    if isinstance(value, list):
        return any(_has_constant_with_quote_or_backslash(v) for v in value)
    return False


def _may_be_schema_reply(text: str, finish_reason: str | None, stop: Sequence[str]) -> bool:
    """Whether `text` can be a constrained reply to a JSON schema: JSON, or cut short (by the
    token cap, or by one of the request's `stop` strings, which servers strip and report as
    "stop") after the start of a JSON object or array."""
    if finish_reason == "length" or (stop and text.lstrip()[:1] in ("{", "[")):
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _messages_json(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def _completion_logprobs(data: Any, url: str) -> dict[str, Any]:
    """The log-probs of a /v1/completions reply in the legacy OpenAI shape (`tokens`,
    `token_logprobs`, `top_logprobs` keyed by token text). llama.cpp's llama-server answers in
    the chat shape (`content`: per token its id, log-prob and top log-probs, each with an id);
    its tokens are named "token_id:N" there, as vLLM names them with
    return_tokens_as_token_ids, so no text stands for two tokens. A `content` of another shape
    gives no log-probs ({})."""
    logprobs = _first_choice(data, url).get("logprobs")
    if not isinstance(logprobs, dict):
        return {}
    content = logprobs.get("content")
    if content is None:
        return logprobs

    def entry(e: Any) -> bool:
        return (isinstance(e, dict) and type(e.get("id")) is int
                and type(e.get("logprob")) in (int, float))

    if not isinstance(content, list) or not all(
            entry(e) and isinstance(e.get("top_logprobs") or [], list)
            and all(entry(t) for t in e.get("top_logprobs") or []) for e in content):
        return {}
    return {"tokens": [f"token_id:{e['id']}" for e in content],
            "token_logprobs": [e.get("logprob") for e in content],
            "top_logprobs": [{f"token_id:{t['id']}": t.get("logprob")
                              for t in e.get("top_logprobs") or []} for e in content]}


def _first_choice(data: Any, url: str) -> dict[str, Any]:
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise ServerRejectedError(f"{url} answered without choices: {str(data)[:300]}",
                                  "Check that --base-url points at an OpenAI-compatible API.")
    return choices[0]


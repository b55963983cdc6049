"""OpenAICompatLLM choice scoring that is exact or refuses (under a bias, the bounds on each
position's normaliser), its tokenizer caches and its context window, on fake servers
(httpx.MockTransport); then parity with the embedded backend on the tiny model behind a real
`python -m llama_cpp.server` (marked `server` and `model`)."""

from __future__ import annotations

import ast
import itertools
import json
import math
from dataclasses import replace

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.errors import ConfigError, ServerRejectedError
from faithrag.llm.base import (
    ChoiceRequest,
    ChoiceScores,
    GenerationRequest,
    Message,
    TokenBias,
    user_prompt,
)
from faithrag.llm.openai import (
    OpenAICompatLLM,
    log_normaliser_bounds,
    probability_error,
)
from faithrag.llm.openai.replies import completion_logprobs

BASE = "http://llm.test/v1"
TEMPLATE = "<s>user: q\nassistant: "


WORDS = [b" Canberra", b" Darwin", b" Sydney"]  # tokens of their own, as in a real BPE


def encode(text: str) -> list[int]:
    """Byte tokens (0-255), except that each of WORDS is one token (256 + its index)."""
    data, ids, i = text.encode(), [], 0
    while i < len(data):
        word = next((w for w in WORDS if data.startswith(w, i)), None)
        ids.append(256 + WORDS.index(word) if word else data[i])
        i += len(word) if word else 1
    return ids


def decode(ids) -> str:
    return b"".join(WORDS[i - 256] if i >= 256 else bytes([i]) for i in ids).decode(
        errors="replace")


def byte_logprobs(prompt: str) -> list[float]:
    """A made-up model over those tokens: log-softmax of logits that depend on the prompt."""
    logits = [((b * 7 + len(prompt) * 3 + sum(prompt.encode()[-3:])) % 13) / 3.0
              for b in range(256 + len(WORDS))]
    top = max(logits)
    z = math.log(sum(math.exp(v - top) for v in logits)) + top
    return [v - z for v in logits]


class ForcingServer:
    """llama-server flavour (the tokenizer above, /apply-template) whose /v1/completions generates
    one token from `byte_logprobs` plus `logit_bias` and reports its log-prob before the bias,
    as llama-cpp-python and vLLM do; `logprobs=False` imitates a server that returns none.
    Top log-probs are keyed by text, so the bytes 128-255 share one key ("\ufffd"), as byte
    fragments do on llama-cpp-python; `max_logprobs` refuses larger requests as vLLM does;
    `biased_tops` reports top log-probs after the bias. A GBNF `grammar` holding one literal is
    ignored unless `grammar` says how the server spells that literal: "canonical" (its
    tokenization, as llama-cpp-python's greedy pick under the grammar usually does) or "bytes"
    (one byte a token, which differs for WORDS). `content_shape` answers /v1/completions'
    log-probs in the chat shape with token ids, as llama.cpp's llama-server does."""

    def __init__(self, logprobs: bool = True, chat_text: str = "ok",
                 max_logprobs: int | None = None, biased_tops: bool = False,
                 grammar: str | None = None, content_shape: bool = False):
        self.content_shape = content_shape
        self.logprobs = logprobs
        self.chat_text = chat_text
        self.max_logprobs = max_logprobs
        self.biased_tops = biased_tops
        self.grammar = grammar
        self.calls: list[tuple[str, dict]] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        body = json.loads(req.content) if req.content else {}
        path = req.url.path
        self.calls.append((path, body))
        if path == "/tokenize":
            ids = encode(body["content"])
            if body.get("with_pieces"):
                return httpx.Response(200, json={"tokens": [
                    {"id": i, "piece": decode([i])} for i in ids]})
            return httpx.Response(200, json={"tokens": ids})
        if path == "/detokenize":
            return httpx.Response(200, json={"content": decode(body["tokens"])})
        if path == "/apply-template":
            text = "".join(f"{m['role']}: {m['content']}\n" for m in body["messages"])
            return httpx.Response(200, json={"prompt": f"<s>{text}assistant: "})
        if path == "/v1/chat/completions":
            choice = {"index": 0, "message": {"role": "assistant", "content": self.chat_text},
                      "finish_reason": "stop"}
            return httpx.Response(200, json={"choices": [choice], "usage": {
                "prompt_tokens": 10, "completion_tokens": 2}})
        if path == "/v1/completions":
            if self.max_logprobs is not None and (body.get("logprobs") or 0) > self.max_logprobs:
                return httpx.Response(400, json={"error": {"message": "too many logprobs"}})
            return httpx.Response(200, json=self.complete(body))
        return httpx.Response(404)

    def complete(self, body: dict) -> dict:
        if self.grammar and body.get("grammar"):
            return self.complete_literal(body)
        values = byte_logprobs(body["prompt"])
        bias = {int(k): v for k, v in (body.get("logit_bias") or {}).items()}
        token = max(range(len(values)), key=lambda b: values[b] + bias.get(b, 0.0))
        piece = decode([token])
        choice: dict = {"index": 0, "text": piece, "finish_reason": "length"}
        shown = [v + bias.get(b, 0.0) for b, v in enumerate(values)] if self.biased_tops \
            else values
        if self.logprobs and body.get("logprobs") is not None:
            ranked = sorted(range(len(values)), key=lambda b: -shown[b])[:body["logprobs"]]
            top = {decode([b]): shown[b] for b in ranked}
            choice["logprobs"] = self.shaped([token], [values[token]], [
                {b: shown[b] for b in ranked}]) if self.content_shape else {
                "tokens": [piece], "token_logprobs": [values[token]],
                "top_logprobs": [{**top, piece: shown[token]}],
                "text_offset": [len(body["prompt"])]}
        return {"choices": [choice], "usage": {"prompt_tokens": len(body["prompt"].encode()),
                                               "completion_tokens": 1}}

    def complete_literal(self, body: dict) -> dict:
        text = ast.literal_eval(body["grammar"].split("::=", 1)[1].strip())
        ids = (encode(text) if self.grammar == "canonical" else list(text.encode()))
        ids = ids[:body["max_tokens"]]
        pieces, logprobs, tops, by_id = [], [], [], []
        for i, token in enumerate(ids):
            values = byte_logprobs(body["prompt"] + decode(ids[:i]))
            ranked = sorted(range(len(values)), key=lambda b: -values[b])[:body["logprobs"]]
            pieces.append(decode([token]))
            logprobs.append(values[token])
            tops.append({**{decode([b]): values[b] for b in ranked}, pieces[-1]: values[token]})
            by_id.append({b: values[b] for b in ranked})
        choice = {"index": 0, "text": "".join(pieces), "finish_reason": "stop",
                  "logprobs": self.shaped(ids, logprobs, by_id) if self.content_shape else {
                      "tokens": pieces, "token_logprobs": logprobs, "top_logprobs": tops}}
        return {"choices": [choice], "usage": {"prompt_tokens": len(body["prompt"].encode()),
                                               "completion_tokens": len(ids)}}

    @staticmethod
    def shaped(ids: list[int], logprobs: list[float], tops: list[dict[int, float]]) -> dict:
        """llama-server's shape: per generated token its id, text, log-prob and top log-probs."""
        return {"content": [
            {"id": t, "token": decode([t]), "logprob": lp, "top_logprobs": [
                {"id": b, "token": decode([b]), "logprob": v} for b, v in top.items()]}
            for t, lp, top in zip(ids, logprobs, tops)]}

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.calls if p == path)


class ByteTokenizer:
    """The fake server's tokenizer and chat template, as a local tokenizer."""

    name = "bytes"
    vocab_size = 256 + len(WORDS)
    context_length = None

    def encode(self, text: str, special: bool) -> list[int]:
        return encode(text)

    def decode(self, ids) -> str:
        return decode(ids)

    def render_chat(self, messages) -> str:
        return "<s>" + "".join(f"{m.role}: {m.content}\n" for m in messages) + "assistant: "


def server_llm(server: ForcingServer, **kwargs) -> OpenAICompatLLM:
    return OpenAICompatLLM(BASE, "m", transport=httpx.MockTransport(server), backoff=0.001,
                           **kwargs)


def exact_logprob(context: str, choice: str) -> float:
    """What an exact scorer must give: each byte of `choice` (no word of WORDS in it) under
    the made-up model."""
    return sum(byte_logprobs(context + choice[:k])[b] for k, b in enumerate(choice.encode()))


def scoring_requests(server: ForcingServer) -> list[dict]:
    """The completion requests that score: not the capability probe's, nor those that make
    the server read a prompt first (`cache_prompt` false)."""
    return [b for p, b in server.calls if p == "/v1/completions"
            and "faithrag" not in b["prompt"] and b.get("cache_prompt") is not False]


def test_forced_tokens_score_whole_choices_exactly_after_one_probe():
    server = ForcingServer()
    llm = server_llm(server)
    request = ChoiceRequest(user_prompt("q"), ("New York", "New Delhi", "Paris"), "A: ")
    first = llm.score_choices(request)
    context = "<s>user: q\nassistant: A: "
    assert first.logprobs == pytest.approx([exact_logprob(context, c) for c in request.choices])
    assert first.token_counts == [8, 9, 5] and not first.warnings
    again = llm.score_choices(request)
    assert again.logprobs == first.logprobs
    probes = [b for p, b in server.calls if p == "/v1/completions" and "faithrag" in b["prompt"]
              and b.get("cache_prompt") is not False]
    # top log-probs, one forced token, the widest top, a grammar run: once per backend
    assert len(probes) == 4
    forced = scoring_requests(server)
    # "New " is shared by two choices: its four tokens are asked once, and the second call
    # asks nothing again
    assert len(forced) == len({(context + c[:k], c[k]) for c in request.choices
                               for k in range(len(c))})
    assert all(b["max_tokens"] == 1 and len(b["logit_bias"]) == 1 for b in forced)


def test_a_server_taking_grammars_scores_each_choice_in_one_request():
    server = ForcingServer(grammar="canonical")
    llm = server_llm(server, concurrency=1)  # the requests in the choices' order
    request = ChoiceRequest(user_prompt("q"), ("New York", "New Delhi", "Paris"), "A: ")
    first = llm.score_choices(request)
    context = "<s>user: q\nassistant: A: "
    assert first.logprobs == pytest.approx([exact_logprob(context, c) for c in request.choices])
    assert llm.score_choices(request).logprobs == first.logprobs  # asked once
    llm.forget_scores()
    assert llm.score_choices(request).logprobs == first.logprobs  # asked again
    scoring = scoring_requests(server)
    assert [b["max_tokens"] for b in scoring] == [8, 9, 5] * 2
    assert all(b["grammar"].startswith("root ::= ") for b in scoring)


def test_a_choice_the_server_spells_with_other_tokens_is_asked_token_by_token():
    request = ChoiceRequest(user_prompt("q"), ("Darwin Sydney", "Canberra"), "A: ")
    server = ForcingServer(grammar="bytes")
    scores = server_llm(server).score_choices(request)
    assert scores.logprobs == pytest.approx(server_llm(ForcingServer()).score_choices(
        request).logprobs)
    forced = [b for b in scoring_requests(server) if "grammar" not in b]
    assert len(forced) == 2 + 1  # " Darwin", " Sydney"; " Canberra" is one token anyway


class LlamaCppPythonServer(ForcingServer):
    """ForcingServer answering as llama-cpp-python's server: /extras/tokenize, no /tokenize."""

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.url.path == "/tokenize":
            return httpx.Response(404)
        if req.url.path == "/extras/tokenize":
            return httpx.Response(200, json={"tokens": encode(json.loads(req.content)["input"])})
        return super().__call__(req)


def test_llama_cpp_python_reads_a_scored_prompt_once_and_its_last_token_with_each_option():
    """Each score_choices call empties the server's prompt cache (a one-token request), has it
    read the prompt but its last token, then asks each option on the whole prompt: the server
    then reads only the last token and the option's, as the embedded backend does."""
    server = LlamaCppPythonServer(grammar="canonical")
    llm = server_llm(server, tokenizer=ByteTokenizer(), concurrency=1)
    request = ChoiceRequest(user_prompt("q"), ("New York", "Paris"), "A: ")
    context = "<s>user: q\nassistant: A: "
    llm.score_choices(request)  # the capability probe, once
    for _ in range(2):
        llm.forget_scores()
        start = len(server.calls)
        scores = llm.score_choices(request)
        assert scores.logprobs == pytest.approx([exact_logprob(context, c)
                                                 for c in request.choices])
        sent = [(b["prompt"], b.get("logprobs") is not None)
                for p, b in server.calls[start:] if p == "/v1/completions"
                and "faithrag" not in b["prompt"]]
        assert sent == [("\n", False), (context[:-1], False), (context, True), (context, True)]


@pytest.mark.parametrize("keep_prefix", [True, False])
def test_a_kept_prompt_head_is_read_on_its_own_first_on_a_llama_cpp_server(keep_prefix):
    """A keep_prefix request's recurring head (leading messages and text) is what the embedded
    backend reads on its own before the rest of the prompt; llama-server is made to do the
    same (the head from an empty cache, then the request, which reads only the rest)."""
    server = ForcingServer()
    llm = server_llm(server, tokenizer=ByteTokenizer())
    messages = (Message("system", "Be brief."), Message("user", "Passages: A. Question: q"))
    llm.generate([GenerationRequest(messages, max_tokens=4, cache_prefix=1,
                                    cache_prefix_text="Passages: A.", keep_prefix=keep_prefix)])
    sent = [(p, b.get("prompt"), b.get("cache_prompt")) for p, b in server.calls
            if p.endswith("completions")]
    head = [("/v1/completions", "<s>system: Be brief.\nuser: Passages: A.", False)]
    assert sent == (head if keep_prefix else []) + [("/v1/chat/completions", None, None)]


def test_a_bias_is_added_exactly_when_each_choice_is_one_token_at_one_position():
    server = ForcingServer()
    bias = TokenBias.from_mapping({ord("B"): 2.5, ord("Z"): -4.0})
    scores = server_llm(server).score_choices(
        ChoiceRequest(user_prompt("q"), ("A", "B", "C"), "A: ", bias))
    row = byte_logprobs("<s>user: q\nassistant: A: ")
    assert scores.logprobs == pytest.approx([row[65], row[66] + 2.5, row[67]])
    assert scores.probability_error == 0.0


# ----------------------------------------------------------------------------- bias normaliser
CONTEXT = "<s>user: q\nassistant: A: "


def biased_logprobs(prompt: str, bias: dict[int, float]) -> list[float]:
    """log-softmax of the made-up model's logits plus `bias`: what the embedded backend gives."""
    shifted = [v + bias.get(b, 0.0) for b, v in enumerate(byte_logprobs(prompt))]
    z = math.log(sum(math.exp(v) for v in shifted))
    return [v - z for v in shifted]


def exact_probabilities(choices, bias: dict[int, float]) -> list[float]:
    totals = [sum(biased_logprobs(CONTEXT + c[:k], bias)[b] for k, b in enumerate(c.encode()))
              for c in choices]
    exps = [math.exp(t - max(totals)) for t in totals]
    return [e / sum(exps) for e in exps]


@pytest.mark.parametrize(("grammar", "content_shape"),
                         [(None, False), ("canonical", False), ("canonical", True)])
def test_a_bias_on_choices_of_several_tokens_is_normalised_from_the_top_log_probs(grammar,
                                                                                  content_shape):
    server = ForcingServer(grammar=grammar, content_shape=content_shape)
    llm = server_llm(server, tokenizer=ByteTokenizer())
    bias = {ord("e"): 3.0, ord("a"): -1.0, ord("x"): 3.0, 200: 3.0}
    choices = ("Bee", "Cat", "Axe")
    scores = llm.score_choices(
        ChoiceRequest(user_prompt("q"), choices, "A: ", TokenBias.from_mapping(bias)))
    assert scores.probabilities() == pytest.approx(exact_probabilities(choices, bias), abs=1e-9)
    assert scores.probability_error < 1e-9 and scores.token_counts == [3, 3, 3]
    verdict = llm._scorer.forced.scoring
    assert verdict.top_n == 1000  # the server returns that many top log-probs
    assert verdict.tops_by_id == content_shape and verdict.grammar_runs == (grammar is not None)
    alone = [b for p, b in server.calls if p == "/v1/completions" and b.get("logit_bias") == {
        "200": 100.0}]
    # byte 200, listed under the text that all bytes 128-255 share, is asked on its own once per
    # position that not every choice shares (the first one is: its normaliser cancels); listed
    # under its id (llama-server's shape), never
    expected = {CONTEXT + c[:k] for c in choices for k in (1, 2)}
    assert len(alone) == (0 if content_shape else len(expected))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["id", "logprob", "top_logprobs", "token",
                                                       "content", "x"]), inner, max_size=4),
                    max_leaves=12)


@given(JSON)
def test_completion_log_probs_of_any_shape_are_read_or_given_as_none(logprobs):
    data = {"choices": [{"text": "", "logprobs": logprobs}]}
    read = completion_logprobs(data, BASE)
    assert isinstance(read, dict)
    if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list) and read:
        assert len(read["tokens"]) == len(read["token_logprobs"]) == len(logprobs["content"])
        assert all(isinstance(v, (int, float)) for v in read["token_logprobs"])
        assert all(k.startswith("token_id:") for top in read["top_logprobs"] for k in top)


def test_llama_server_reads_a_scored_prompt_but_its_last_token_once_from_an_empty_cache():
    server = ForcingServer(grammar="canonical", content_shape=True)
    llm = server_llm(server, tokenizer=ByteTokenizer(), concurrency=1)
    request = ChoiceRequest(user_prompt("q"), ("New York", "Paris"), "A: ")
    scores = llm.score_choices(request)
    context = "<s>user: q\nassistant: A: "
    assert scores.logprobs == pytest.approx([exact_logprob(context, c) for c in request.choices])
    sent = [(b["prompt"], b.get("cache_prompt")) for p, b in server.calls
            if p == "/v1/completions" and "faithrag" not in b["prompt"]]
    assert sent == [(context[:-1], False), (context, None), (context, None)]


def test_a_bias_the_top_log_probs_cannot_bound_closely_enough_is_refused():
    llm = server_llm(ForcingServer(max_logprobs=20), tokenizer=ByteTokenizer())
    bias = TokenBias.from_mapping({b: 3.0 for b in b"abcdefghijklmnopqrstuvwxyz"})
    with pytest.raises(ServerRejectedError, match="known only to within") as refused:
        llm.score_choices(ChoiceRequest(user_prompt("q"), ("Bee", "Cat"), "A: ", bias))
    # the wider request was refused, as vLLM's default cap does
    assert llm._scorer.forced.scoring.top_n == 20
    assert "--llm llamacpp" in refused.value.hint and "--max-logprobs 1000" in refused.value.hint
    # without a local tokenizer the top log-probs' texts name no tokens: only the forced
    # tokens are known, and the same choices are refused
    with pytest.raises(ServerRejectedError, match="known only to within"):
        server_llm(ForcingServer()).score_choices(
            ChoiceRequest(user_prompt("q"), ("Bee", "Cat"), "A: ",
                          TokenBias.from_mapping({ord("B"): 2.5, ord("Z"): -4.0})))


def test_reported_probabilities_are_within_their_recorded_bound_or_refused():
    outcomes = set()
    for cap in (20, 60, 150, None):
        for bias in ({ord("e"): 3.0}, {ord("e"): 3.0, ord("t"): -1.0, 0: 3.0},
                     {b: -1.0 for b in range(0, 259, 3)}, {b: 3.0 for b in b"aeiou"}):
            llm = server_llm(ForcingServer(max_logprobs=cap), tokenizer=ByteTokenizer())
            request = ChoiceRequest(user_prompt("q"), ("Bee", "Cat", "Axe"), "A: ",
                                    TokenBias.from_mapping(bias))
            try:
                scores = llm.score_choices(request)
            except ServerRejectedError as exc:
                assert "known only to within" in exc.message
                outcomes.add("refused")
                continue
            outcomes.add("scored")
            assert scores.probability_error <= 0.005
            exact = exact_probabilities(request.choices, bias)
            assert max(abs(a - b) for a, b in zip(scores.probabilities(), exact)) \
                <= scores.probability_error + 1e-9
    assert outcomes == {"refused", "scored"}


def test_top_log_probs_reported_after_the_bias_cannot_bound_it():
    llm = server_llm(ForcingServer(biased_tops=True), tokenizer=ByteTokenizer())
    bias = TokenBias.from_mapping({ord("e"): 3.0})
    with pytest.raises(ServerRejectedError, match="not the model's own"):
        llm.score_choices(ChoiceRequest(user_prompt("q"), ("Bee", "Cat"), "A: ", bias))
    # a bias on one token per choice at one position needs no normaliser
    llm.score_choices(ChoiceRequest(user_prompt("q"), ("B", "C"), "A: ", bias))


@pytest.mark.parametrize(("bias", "known", "free", "caps", "expected"), [
    # every biased token known: exact
    ({1: 2.0, 2: -1.0}, {1: 0.5, 2: 0.3, 3: 0.2}, 0.0, {},
     (0.5 * math.e ** 2 + 0.3 / math.e + 0.2,) * 2),
    # no mass left for the unknown ones: exact
    ({2: 5.0}, {1: 1.0}, 0.0, {2: 0.5}, (1.0, 1.0)),
    # a boost outside the top: none of its cap, or all of it
    ({2: 3.0}, {1: 0.9}, 0.1, {2: 0.02}, (1.0, 1 + 0.02 * math.expm1(3))),
    # a suppression outside the top: the other way round
    ({2: -2.0}, {1: 0.9}, 0.1, {2: 0.02}, (1 + 0.02 * math.expm1(-2), 1.0)),
    # a cap above the free mass is the free mass
    ({2: 3.0}, {1: 0.9}, 0.1, {2: 0.5}, (1.0, 1 + 0.1 * math.expm1(3))),
    # two boosts share the free mass, the larger first
    ({2: 1.0, 3: 3.0}, {1: 0.9}, 0.1, {2: 0.06, 3: 0.06},
     (1.0, 1 + 0.06 * math.expm1(3) + 0.04 * math.expm1(1))),
    # a known boost and unknown tokens of both signs
    ({1: 1.0, 2: 3.0, 3: -3.0}, {1: 0.5}, 0.5, {2: 0.1, 3: 0.2},
     (1 + 0.5 * math.expm1(1) + 0.2 * math.expm1(-3), 1 + 0.5 * math.expm1(1)
      + 0.1 * math.expm1(3))),
])
def test_log_normaliser_bounds_edge_cases(bias, known, free, caps, expected):
    low, high = log_normaliser_bounds(bias, known, free, caps)
    assert (math.exp(low), math.exp(high)) == pytest.approx(expected, rel=1e-12)


@given(st.lists(st.floats(-8, 8), min_size=2, max_size=40), st.data())
def test_log_normaliser_bounds_hold_the_exact_normaliser(logits, data):
    """From the top n of a distribution, as a server returns them (the forced token known too),
    the bounds hold the exact log-normaliser, and meet when n covers the vocabulary."""
    top_value = max(logits)
    weights = [math.exp(v - top_value) for v in logits]
    p = [w / sum(weights) for w in weights]
    vocab = range(len(p))
    bias = data.draw(st.dictionaries(st.sampled_from(vocab), st.floats(-6, 6), min_size=1))
    n = data.draw(st.integers(1, len(p)))
    forced = data.draw(st.sampled_from(vocab))
    ranked = sorted(vocab, key=lambda v: -p[v])[:n]
    known = {v: p[v] for v in ranked} | {forced: p[forced]}
    free = 1.0 - sum(known.values())
    caps = {v: min(p[r] for r in ranked) for v in bias if v not in known}
    low, high = log_normaliser_bounds(bias, known, free, caps)
    exact = math.log(sum(p[v] * math.exp(bias.get(v, 0.0)) for v in vocab))
    assert low - 1e-9 <= exact <= high + 1e-9
    if n == len(p):
        assert high - low < 1e-9


@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(0, 3)), min_size=2, max_size=3),
       st.data())
def test_probability_error_is_the_largest_deviation_over_the_box(boxes, data):
    lows = [low for low, _ in boxes]
    highs = [low + width for low, width in boxes]
    reported = [data.draw(st.floats(lo, hi)) for lo, hi in zip(lows, highs)]
    bound = probability_error(lows, highs, reported)

    def softmax(scores):
        exps = [math.exp(x) for x in scores]
        return [e / sum(exps) for e in exps]

    shown = softmax(reported)
    corners = [softmax([hi if bit else lo for lo, hi, bit in zip(lows, highs, bits)])
               for bits in itertools.product((0, 1), repeat=len(boxes))]
    worst = max(abs(c[i] - shown[i]) for c in corners for i in range(len(boxes)))
    assert bound == pytest.approx(worst, abs=1e-12)
    assert probability_error(reported, reported, reported) == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("answer_prefix", ["", "A: "])
def test_a_server_without_log_probs_could_not_score_rather_than_uniform(answer_prefix):
    server = ForcingServer(logprobs=False)
    llm = server_llm(server)
    for choices in [("A", "B", "C"), ("New York", "New Delhi")]:
        with pytest.raises(ServerRejectedError, match="Could not score the choices"):
            llm.score_choices(ChoiceRequest(user_prompt("q"), choices, answer_prefix))


def test_tokenize_and_detokenize_ask_the_server_once_per_text():
    server = ForcingServer()
    llm = server_llm(server)
    for _ in range(3):
        assert llm.tokenize("Darwin") == list(b"Darwin")
        assert llm.detokenize(list(b"Darwin")) == "Darwin"
    assert server.count("/tokenize") == 2  # the flavour probe, then "Darwin"
    assert server.count("/detokenize") == 1
    # llama-server sent the pieces with the ids: single ids need no request
    assert [llm.detokenize([b]) for b in b"Darwin"] == list("Darwin")
    assert server.count("/detokenize") == 1


def test_csrag_choices_question_costs_a_bounded_number_of_tokenizer_calls(tmp_path):
    from faithrag.pipeline import Pipeline

    (tmp_path / "capital.txt").write_text(
        "Following the 2031 reorganisation, the capital of Australia moved to Darwin.")
    (tmp_path / "sydney.txt").write_text("Sydney is the largest city in Australia.")
    server = ForcingServer(chat_text="Canberra is the capital of Australia.")
    llm = server_llm(server, context_window=4096)
    pipeline = Pipeline.from_config(llm=llm, docs=tmp_path, method="csrag_choices", k=2,
                                    use_cache=False, plain=True)
    result = pipeline.run("Which city is the capital of Australia?",
                          choices=["Canberra", "Darwin", "Sydney"])
    assert result.answer.text in ("Canberra", "Darwin", "Sydney")
    tokenizer_calls = server.count("/tokenize") + server.count("/detokenize")
    distinct_texts = len({(b["content"], b.get("parse_special")) for p, b in server.calls
                          if p == "/tokenize"})
    assert tokenizer_calls == distinct_texts  # one per text and mode (the flavour probe is one)
    assert tokenizer_calls <= 40 and server.count("/detokenize") == 0


def test_context_window_from_the_server_or_a_clear_error_naming_n_ctx():
    def props(req):
        if req.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [1]})
        if req.url.path == "/props":
            return httpx.Response(200, json={"default_generation_settings": {"n_ctx": 3072}})
        return httpx.Response(404)

    assert OpenAICompatLLM(BASE, "m", transport=httpx.MockTransport(props)).context_window == 3072

    def vllm_models(req):
        if req.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [1], "count": 1})
        if req.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 8192}]})
        return httpx.Response(404)

    llm = OpenAICompatLLM(BASE, "m", transport=httpx.MockTransport(vllm_models),
                          context_window=4096)
    assert llm.context_window == 4096  # the smaller one wins

    def silent(req):
        if req.url.path == "/extras/tokenize":
            return httpx.Response(200, json={"tokens": []})
        return httpx.Response(404)

    with pytest.raises(ConfigError) as error:
        _ = OpenAICompatLLM(BASE, "m", transport=httpx.MockTransport(silent)).context_window
    assert "--n-ctx" in error.value.hint


@pytest.mark.model
def test_context_window_from_the_local_gguf_when_the_server_does_not_say(tiny_gguf):
    # a server with no tokenize, models or props endpoint (like OpenAI's own)
    llm = OpenAICompatLLM(BASE, "m", tokenizer=str(tiny_gguf),
                          transport=httpx.MockTransport(lambda req: httpx.Response(404)))
    assert llm.context_window == 8192  # SmolLM2's llama.context_length


# ----------------------------------------------------------------------------- real server
DARWIN = (
    Message("system", "Answer strictly according to the given context."),
    Message("user", "Context:\n[1] Following the 2031 reorganisation, the capital of Australia "
            "moved from Canberra to Darwin.\n[2] Sydney is the largest city in Australia.\n\n"
            "Question: According to the 2031 reorganisation, which city is the capital of "
            "Australia?\nOptions:\n- Canberra\n- Darwin\n- Sydney\n- New Delhi\n\n"
            "Reply with the text of the correct option."))


@pytest.mark.server
@pytest.mark.model
def test_server_option_probabilities_equal_the_embedded_backends(any_llama_server, tiny_gguf):
    from faithrag.llm.llamacpp import LlamaCppLLM

    server = OpenAICompatLLM(any_llama_server, "tiny", tokenizer=str(tiny_gguf),
                             context_window=2048, concurrency=1)
    embedded = LlamaCppLLM(str(tiny_gguf), n_ctx=2048, n_threads=1)
    one_token = ("Canberra", "Darwin", "Sydney")  # " Canberra" etc. are single tokens
    bias = TokenBias.from_mapping({t: 3.0 for c in ("Darwin", "Sydney")
                                   for t in server.tokenize(" " + c)})
    requests = [ChoiceRequest(DARWIN, one_token, "Answer: "),
                ChoiceRequest(DARWIN, one_token, "Answer: ", bias),
                ChoiceRequest(DARWIN, ("New Delhi", "New York", "Canberra"), "Answer: ")]
    for request in requests:
        over_http = server.score_choices(request)
        in_process = embedded.score_choices(request)
        assert over_http.token_counts == in_process.token_counts
        assert over_http.probabilities() == pytest.approx(in_process.probabilities(), abs=1e-3)
        assert over_http.best == in_process.best
    verdict = server._scorer.forced.scoring
    assert verdict.usable and verdict.grammar_runs


@pytest.mark.server
@pytest.mark.model
def test_server_option_probabilities_do_not_depend_on_what_the_server_read_before(
        any_llama_server, tiny_gguf):
    """llama.cpp's servers read a prompt after the prefix it shares with what the previous
    request left; scoring requests are sent so that they read the prompt from an empty cache,
    its last token on its own, as the embedded backend does: the same log-probs to float
    noise, whatever ran before."""
    from faithrag.llm.llamacpp import LlamaCppLLM

    server = OpenAICompatLLM(any_llama_server, "tiny", tokenizer=str(tiny_gguf),
                             context_window=2048, concurrency=1)
    request = ChoiceRequest(DARWIN, ("Northern Territory", "New South Wales"), "Answer: ")
    exact = LlamaCppLLM(str(tiny_gguf), n_ctx=2048, n_threads=1).score_choices(request)
    rendered = server.render_chat(DARWIN) + "Answer: "
    scored = []
    for before in ("Reset.", rendered + "New", rendered + "Northern"):
        httpx.post(f"{any_llama_server}/completions", json={"prompt": before, "max_tokens": 1},
                   timeout=60).raise_for_status()
        server.forget_scores()
        scored.append(server.score_choices(request).logprobs)
    assert scored[1] == pytest.approx(scored[0], abs=1e-6)
    assert scored[2] == pytest.approx(scored[0], abs=1e-6)
    assert scored[0] == pytest.approx(exact.logprobs, abs=1e-3)


@pytest.mark.server
@pytest.mark.model
def test_server_grammar_runs_score_each_option_in_one_request_as_in_process(any_llama_server,
                                                                            tiny_gguf):
    """llama.cpp's servers take a GBNF grammar and report log-probs before it: an option of
    several tokens that the server spells as the tokenizer does is one request, and its score
    is the embedded backend's (which also reads the option's tokens after the prompt)."""
    from faithrag.llm.llamacpp import LlamaCppLLM

    server = OpenAICompatLLM(any_llama_server, "tiny", tokenizer=str(tiny_gguf),
                             context_window=2048, concurrency=1)
    request = ChoiceRequest(DARWIN, ("Northern Territory", "New South Wales"), "Answer: ")
    runs = server._scorer.forced.runs_cached
    before = runs.cache_info().misses
    scores = server.score_choices(request)
    assert server._scorer.forced.scoring.grammar_runs and runs.cache_info().misses - before == 2
    assert min(scores.token_counts) > 1
    in_process = LlamaCppLLM(str(tiny_gguf), n_ctx=2048, n_threads=1).score_choices(request)
    assert scores.logprobs == pytest.approx(in_process.logprobs, abs=1e-3)


def test_stages_that_score_after_a_partial_answer_are_refused_without_a_template():
    def llama_cpp_python(req):  # a tokenize endpoint, no chat template endpoint
        if req.url.path == "/extras/tokenize":
            return httpx.Response(200, json={"tokens": list(json.loads(req.content)["input"]
                                                            .encode())})
        return httpx.Response(404)

    llm = OpenAICompatLLM(BASE, "m", transport=httpx.MockTransport(llama_cpp_python))
    with pytest.raises(ConfigError, match="Stage 'csrag_choices'") as refused:
        llm.check_answer_scoring("csrag_choices")
    assert "--tokenizer" in refused.value.hint
    server_llm(ForcingServer()).check_answer_scoring("csrag_choices")  # /apply-template: fine


@pytest.mark.server
@pytest.mark.model
def test_server_scores_options_of_several_tokens_under_a_dense_bias(any_llama_server, tiny_gguf):
    """CSRAG's dense bias (-1 on fact tokens, +3 on context tokens) on options of several
    tokens, over HTTP and in process. The bias's effect (biased minus unbiased scores, relative
    to the first option) is compared: it is the same arithmetic on both sides (the model's own
    log-probs are compared in the tests above)."""
    from faithrag.llm.llamacpp import LlamaCppLLM

    server = OpenAICompatLLM(any_llama_server, "tiny", tokenizer=str(tiny_gguf),
                             context_window=2048, concurrency=1)
    embedded = LlamaCppLLM(str(tiny_gguf), n_ctx=2048, n_threads=1)
    bias = TokenBias.from_sets([
        (-1.0, server.tokenize("Canberra is the capital of Australia. New Delhi is in India.")),
        (3.0, server.tokenize(DARWIN[1].content))])
    scored = 0
    for choices in [("Northern Territory", "New South Wales"),
                    ("New Delhi", "New York", "Canberra"),
                    ("Darwin", "Sydney", "New Delhi")]:
        plain = ChoiceRequest(DARWIN, choices, "Answer: ")
        try:
            over_http = server.score_choices(replace(plain, bias=bias))
        except ServerRejectedError as exc:
            assert "known only to within" in exc.message
            continue
        scored += 1
        assert over_http.probability_error <= 0.005
        unbiased_http = server.score_choices(plain)
        unbiased, biased = embedded.score_choices_under(plain, [None, bias])

        def effect(with_bias, without):
            shift = [b - u for b, u in zip(with_bias.logprobs, without.logprobs)]
            return [s - shift[0] for s in shift]

        assert effect(over_http, unbiased_http) == pytest.approx(effect(biased, unbiased),
                                                                 abs=0.05)
        # the embedded backend's scores moved by the server's bias effect
        moved = ChoiceScores(choices, [u + e for u, e in zip(
            unbiased.logprobs, effect(over_http, unbiased_http))], [1] * len(choices), 0, 0.0)
        assert moved.probabilities() == pytest.approx(biased.probabilities(), abs=0.02)
    assert scored >= 2

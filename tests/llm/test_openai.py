"""OpenAICompatLLM: unit tests on httpx.MockTransport, then tests against a real llama-cpp-python
server started on 127.0.0.1 with the tiny GGUF (marked `server` and `model`)."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.errors import ConfigError, ServerRejectedError, ServerUnreachableError
from faithrag.llm.base import ChoiceRequest, ChoiceScores, GenerationRequest, TokenBias, user_prompt
from faithrag.llm.openai import OpenAICompatLLM, logit_bias_payload

BASE = "http://llm.test/v1"


def chat_reply(text="ok", logprobs=None, usage=(7, 2), finish="stop"):
    choice = {"index": 0, "message": {"role": "assistant", "content": text},
              "finish_reason": finish}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    body = {"choices": [choice]}
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    return body


def mock_llm(handler, **kwargs) -> OpenAICompatLLM:
    kwargs.setdefault("backoff", 0.001)
    return OpenAICompatLLM(BASE, "m", transport=httpx.MockTransport(handler), **kwargs)


def completions_only(handler):
    """`handler` for (chat) completions; the server-kind probe's endpoints answer 404, as on a
    server that has none (OpenAI)."""
    def route(req: httpx.Request) -> httpx.Response:
        if not req.url.path.endswith("completions"):
            return httpx.Response(404, json={"error": {"message": "not found"}})
        return handler(req)
    return route


def request(text="hi", **kwargs) -> GenerationRequest:
    return GenerationRequest(messages=user_prompt(text), **kwargs)


# ----------------------------------------------------------------------------- logit_bias
def test_bias_payload_uses_string_ids_and_clamps():
    payload, warnings = logit_bias_payload(TokenBias.from_mapping({7: 250.0, 3: -1.5, 9: -400.0}))
    assert payload == {"3": -1.5, "7": 100.0, "9": -100.0}
    assert warnings == ["logit_bias: 2 value(s) clamped to [-100, 100]"]


def test_bias_cap_keeps_largest_magnitude_then_boosts_then_low_ids():
    # CSRAG shape: context-only +3, both +2, parametric-only -1; plus a -3 tie with the boosts
    bias = TokenBias.from_mapping({1: -1.0, 2: 3.0, 3: 2.0, 4: -3.0, 5: 3.0, 6: -1.0})
    assert logit_bias_payload(bias, cap=2)[0] == {"2": 3.0, "5": 3.0}
    assert logit_bias_payload(bias, cap=3)[0] == {"2": 3.0, "4": -3.0, "5": 3.0}
    assert logit_bias_payload(bias, cap=4)[0] == {"2": 3.0, "3": 2.0, "4": -3.0, "5": 3.0}
    payload, warnings = logit_bias_payload(bias, cap=5)
    assert payload == {"1": -1.0, "2": 3.0, "3": 2.0, "4": -3.0, "5": 3.0}  # id 1 before 6
    assert warnings == [("logit_bias capped at 5 of 6 entries (kept the largest |bias|, boosts "
                         "before suppressions on ties); 1 token(s) unbiased")]
    assert logit_bias_payload(bias, cap=6) == (logit_bias_payload(bias)[0], [])


@given(st.dictionaries(st.integers(0, 5000), st.floats(-500, 500).filter(lambda v: abs(v) > 1e-3),
                       max_size=60), st.integers(1, 70))
def test_bias_cap_never_drops_a_larger_bias_than_it_keeps(mapping, cap):
    payload, _ = logit_bias_payload(TokenBias.from_mapping(mapping), cap=cap)
    kept = {int(k) for k in payload}
    assert len(kept) == min(cap, len(mapping))
    assert all(-100.0 <= v <= 100.0 for v in payload.values())
    dropped = [abs(v) for i, v in mapping.items() if i not in kept]
    if dropped:
        assert min(min(abs(v), 100.0) for v in payload.values()) >= min(max(dropped), 100.0) - 1e-4


# ----------------------------------------------------------------------------- generation
def test_generate_sends_parameters_and_reads_the_answer():
    seen = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append((req.url.path, json.loads(req.content), req.headers.get("authorization")))
        return httpx.Response(200, json=chat_reply(
            "Paris", logprobs=[{"token": "Par", "logprob": -0.5}, {"token": "is", "logprob": -0.25}],
            usage=(11, 2), finish="length"))

    llm = mock_llm(completions_only(handler), api_key="sk-test", logit_bias_cap=1)
    bias = TokenBias.from_mapping({5: 3.0, 9: -1.0})
    out = llm.generate([request("Capital?", max_tokens=9, stop=("\n",), seed=4, bias=bias,
                                logprobs=True)])[0]
    path, body, auth = seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert body["messages"] == [{"role": "user", "content": "Capital?"}]
    assert (body["max_tokens"], body["temperature"], body["seed"], body["stop"]) == (9, 0.0, 4, ["\n"])
    assert body["logit_bias"] == {"5": 3.0}
    assert body["logprobs"] is True and body["top_logprobs"] == 0
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.finish_reason) == \
        ("Paris", 11, 2, "length")
    assert out.token_logprobs == [-0.5, -0.25] and out.mean_logprob == -0.375
    assert out.warnings and "capped at 1 of 2" in out.warnings[0]


def test_generate_omits_optional_fields_when_unused():
    bodies = []

    def handler(req):
        bodies.append(json.loads(req.content))
        return httpx.Response(200, json=chat_reply())

    mock_llm(handler).generate([request()])
    assert not {"stop", "logit_bias", "logprobs", "top_logprobs"} & set(bodies[0])


class InFlight:
    """Requests inside a mock server's handler at once, and the most there ever were."""

    def __init__(self):
        self.now = self.peak = 0
        self.lock = threading.Lock()

    @contextmanager
    def request(self):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            yield
        finally:
            with self.lock:
                self.now -= 1


def test_generate_runs_concurrently_and_keeps_input_order():
    in_flight = InFlight()

    def handler(req):
        n = int(json.loads(req.content)["messages"][0]["content"])
        with in_flight.request():
            time.sleep(0.02 * (8 - n))  # later requests finish first
        return httpx.Response(200, json=chat_reply(f"answer {n}"))

    out = mock_llm(completions_only(handler), concurrency=3).generate(
        [request(str(i)) for i in range(8)])
    assert [c.text for c in out] == [f"answer {i}" for i in range(8)]
    assert in_flight.peak == 3


def test_retries_5xx_with_backoff_then_succeeds():
    calls = []

    def handler(req):
        calls.append(time.perf_counter())
        if len(calls) < 3:
            return httpx.Response(500 if len(calls) == 1 else 503, json={"error": {"message": "busy"}})
        return httpx.Response(200, json=chat_reply("fine"))

    out = mock_llm(completions_only(handler), max_retries=3, backoff=0.05).generate([request()])
    assert out[0].text == "fine" and len(calls) == 3
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert gaps[0] >= 0.025 and gaps[1] >= 0.05  # 0.05 then 0.1, each with +-50 % jitter


def test_honours_retry_after_on_429():
    calls = []

    def handler(req):
        calls.append(time.perf_counter())
        if len(calls) == 1:
            return httpx.Response(429, headers={"retry-after": "0.2"}, json={"error": "slow down"})
        return httpx.Response(200, json=chat_reply())

    mock_llm(handler, backoff=0.001).generate([request()])
    assert calls[1] - calls[0] >= 0.2


def test_4xx_is_rejected_at_once_with_the_servers_message():
    calls = []

    def handler(req):
        calls.append(1)
        return httpx.Response(400, json={"error": {"message": "logit_bias: unknown token 999999"}})

    with pytest.raises(ServerRejectedError, match="HTTP 400.*unknown token 999999"):
        mock_llm(completions_only(handler), max_retries=3).generate([request()])
    assert len(calls) == 1


def test_fastapi_validation_detail_is_reported():
    detail = [{"loc": ["body", "top_logprobs"], "msg": "Input should be >= 0"}]
    llm = mock_llm(lambda req: httpx.Response(422, json={"detail": detail}))
    with pytest.raises(ServerRejectedError, match="top_logprobs.*>= 0"):
        llm.generate([request()])


def test_persistent_503_is_unreachable_and_persistent_500_is_rejected():
    calls = []

    def unavailable(req):
        calls.append(1)
        return httpx.Response(503, text="loading model")

    with pytest.raises(ServerUnreachableError, match="did not answer after 3 attempts.*503"):
        mock_llm(unavailable, max_retries=2).generate([request()])
    assert len(calls) == 6  # the server-kind probe's 3 attempts, then the request's
    failing = mock_llm(lambda req: httpx.Response(500, json={"error": {"message": "boom"}}),
                       max_retries=1)
    with pytest.raises(ServerRejectedError, match="kept failing after 2 attempts.*boom"):
        failing.generate([request()])


def test_connection_errors_become_unreachable_with_a_hint():
    calls = []

    def refuse(req):
        calls.append(1)
        raise httpx.ConnectError("connection refused", request=req)

    with pytest.raises(ServerUnreachableError) as info:
        mock_llm(refuse, max_retries=2).generate([request()])
    assert len(calls) == 6  # the server-kind probe's 3 attempts, then the request's
    assert "http://llm.test/v1/chat/completions did not answer after 3 attempts" in info.value.message
    assert "--base-url" in info.value.hint


def test_dead_port_fails_fast():
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAICompatLLM(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, timeout=2.0,
                          backoff=0.05)
    start = time.perf_counter()
    with pytest.raises(ServerUnreachableError, match="after 2 attempts"):
        llm.generate([request()])
    assert time.perf_counter() - start < 2.0


def test_missing_usage_is_estimated_with_a_warning():
    def handler(req):
        if req.url.path == "/extras/tokenize":
            return httpx.Response(200, json={"tokens": list(json.loads(req.content)["input"].encode())})
        if req.url.path == "/v1/chat/completions":
            return httpx.Response(200, json=chat_reply("abc", usage=None))
        return httpx.Response(404)

    out = mock_llm(handler).generate([request("hello")])[0]
    assert out.completion_tokens == 3
    assert out.prompt_tokens == 5 + 8 + 32  # content + per-message + per-chat estimate
    assert out.warnings == ["the server reported no token usage; counts are estimates"]


# ----------------------------------------------------------------------------- tokenizers
def fake_vllm(calls):
    def handler(req):
        calls.append(req.url.path)
        body = json.loads(req.content) if req.content else {}
        if req.url.path == "/tokenize" and "messages" in body:
            text = "".join(m["role"] + m["content"] for m in body["messages"])
            return httpx.Response(200, json={"tokens": list(text.encode()), "count": len(text),
                                             "max_model_len": 8192})
        if req.url.path == "/tokenize":
            ids = list(body["prompt"].encode())
            return httpx.Response(200, json={"tokens": ids, "count": len(ids), "max_model_len": 8192})
        if req.url.path == "/detokenize":
            return httpx.Response(200, json={"prompt": bytes(body["tokens"]).decode()})
        if req.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 4096}]})
        return httpx.Response(404)
    return handler


def test_vllm_tokenizer_endpoints_are_probed_once():
    calls = []
    llm = mock_llm(fake_vllm(calls), context_window=16384)
    assert llm.tokenize("ab") == [97, 98]
    assert llm.detokenize([104, 105]) == "hi"
    assert llm.count_chat_tokens(user_prompt("xy")) == len("userxy")
    assert llm.context_window == 4096  # the server's, smaller than the configured one
    assert calls.count("/tokenize") == 3 and calls.count("/v1/models") == 1
    assert llm.context_window == 4096 and calls.count("/v1/models") == 1


def test_llama_cpp_python_tokenizer_drops_the_bos_it_adds():
    paths = []

    def handler(req):
        paths.append(req.url.path)
        body = json.loads(req.content) if req.content else {}
        if req.url.path == "/extras/tokenize":
            return httpx.Response(200, json={"tokens": [1] + list(body["input"].encode())})
        if req.url.path == "/extras/detokenize":
            return httpx.Response(200, json={"text": bytes(body["tokens"]).decode()})
        return httpx.Response(404, json={"detail": "Not Found"})

    llm = mock_llm(handler, context_window=2048)
    assert llm.tokenize("ab") == [97, 98]
    assert llm.detokenize([97]) == "a"
    assert llm.context_window == 2048
    assert paths[:2] == ["/tokenize", "/extras/tokenize"]  # probe order: root /tokenize first
    with pytest.raises(ConfigError, match="vocabulary size"):
        _ = llm.vocab_size


def test_server_without_tokenizer_or_context_is_a_config_error():
    llm = mock_llm(lambda req: httpx.Response(404))
    with pytest.raises(ConfigError, match="no tokenize endpoint"):
        llm.tokenize("x")
    with pytest.raises(ConfigError, match="tokenizer 'nonsense'"):
        OpenAICompatLLM(BASE, "m", tokenizer="nonsense")
    byte_tokenizer = mock_llm(lambda req: httpx.Response(200, json={"tokens": []})
                              if req.url.path == "/extras/tokenize" else httpx.Response(404))
    with pytest.raises(ConfigError, match="does not report its context window"):
        _ = byte_tokenizer.context_window


# ----------------------------------------------------------------------------- choice scoring
def first_token_server(top, flavor="llama-cpp-python"):
    """Byte tokenizer; chat answers with the given top_logprobs for the first position."""
    bodies = []

    def handler(req):
        body = json.loads(req.content) if req.content else {}
        bodies.append((req.url.path, body))
        if req.url.path == "/extras/tokenize" and flavor == "llama-cpp-python":
            return httpx.Response(200, json={"tokens": list(body["input"].encode())})
        if req.url.path == "/extras/detokenize":
            return httpx.Response(200, json={"text": bytes(body["tokens"]).decode()})
        if req.url.path == "/tokenize" and flavor == "vllm":
            ids = list(body["prompt"].encode())
            return httpx.Response(200, json={"tokens": ids, "count": len(ids)})
        if req.url.path == "/v1/chat/completions":
            entries = [{"token": t, "logprob": lp} for t, lp in top.items()]
            return httpx.Response(200, json=chat_reply(
                "x", logprobs=[{**entries[0], "top_logprobs": entries}], usage=(12, 1)))
        return httpx.Response(404)
    return handler, bodies


def test_first_token_scores_add_the_bias_locally():
    handler, bodies = first_token_server({"B": -0.2, "A": -1.9, "C": -3.0})
    llm = mock_llm(handler)
    bias = TokenBias.from_mapping({ord("A"): 3.0})
    scores = llm.score_choices(ChoiceRequest(user_prompt("q"), ("A", "B", "C"), bias=bias))
    assert scores.logprobs == pytest.approx([1.1, -0.2, -3.0])
    assert scores.best == 0 and scores.token_counts == [1, 1, 1] and scores.prompt_tokens == 12
    chat = [b for p, b in bodies if p == "/v1/chat/completions"]
    assert len(chat) == 1 and "logit_bias" not in chat[0]
    assert (chat[0]["max_tokens"], chat[0]["top_logprobs"]) == (1, 20)


def test_score_choices_many_runs_concurrently_and_keeps_input_order():
    inner, _ = first_token_server({})
    in_flight = InFlight()

    def handler(req):
        if req.url.path != "/v1/chat/completions":
            return inner(req)
        n = int(json.loads(req.content)["messages"][0]["content"])
        with in_flight.request():
            time.sleep(0.02 * (6 - n))  # later requests finish first
        entries = [{"token": "A", "logprob": -0.5 * n}, {"token": "B", "logprob": -1.0}]
        return httpx.Response(200, json=chat_reply(
            "A", logprobs=[{**entries[0], "top_logprobs": entries}]))

    requests = [ChoiceRequest(user_prompt(str(n)), ("A", "B")) for n in range(6)]
    scores = mock_llm(handler, concurrency=3).score_choices_many(requests)
    assert [s.logprobs[0] for s in scores] == pytest.approx([-0.5 * n for n in range(6)])
    assert in_flight.peak == 3


def test_first_token_scores_read_vllm_token_ids():
    handler, bodies = first_token_server({"token_id:66": -0.1, "token_id:65": -2.5}, "vllm")
    scores = mock_llm(handler).score_choices(ChoiceRequest(user_prompt("q"), ("A", "B")))
    assert scores.logprobs == pytest.approx([-2.5, -0.1])
    assert next(b for p, b in bodies if p == "/v1/chat/completions")["return_tokens_as_token_ids"]


def test_choice_missing_from_top_k_is_refused_not_scored():
    handler, _ = first_token_server({"A": -0.1})
    with pytest.raises(ServerRejectedError, match=r"Could not score.*\['Z'\].*top 20"):
        mock_llm(handler).score_choices(ChoiceRequest(user_prompt("q"), ("A", "Z")))


def test_shared_first_token_without_a_template_is_refused_clearly():
    handler, _ = first_token_server({"N": -0.1})
    with pytest.raises(ServerRejectedError, match="share their first token"):
        mock_llm(handler).score_choices(ChoiceRequest(user_prompt("q"), ("New York", "New Delhi")))
    with pytest.raises(ServerRejectedError, match="several tokens"):
        mock_llm(handler).score_choices(ChoiceRequest(user_prompt("q"), ("Ab", "Bc")))
    with pytest.raises(ConfigError, match="answer_prefix") as refused:
        mock_llm(handler).score_choices(ChoiceRequest(user_prompt("q"), ("A", "B"),
                                                      answer_prefix="Answer: "))
    assert "--tokenizer" in refused.value.hint


def llama_server_mock(aligned: bool):
    """llama-server flavour (byte tokenizer, /apply-template) whose /v1/completions echoes
    byte tokens with log-prob -1 each, and whose chat puts only "A" in the top log-probs;
    `aligned=False` imitates llama-cpp-python 0.3.x on a
    prompt without BOS: entries shifted by one, the generated token missing."""
    bodies = []

    def handler(req):
        body = json.loads(req.content) if req.content else {}
        bodies.append((req.url.path, body))
        if req.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": list(body["content"].encode())})
        if req.url.path == "/detokenize":
            return httpx.Response(200, json={"content": bytes(body["tokens"]).decode()})
        if req.url.path == "/v1/chat/completions":
            entries = [{"token": "A", "logprob": -0.1}]
            return httpx.Response(200, json=chat_reply(
                "A", logprobs=[{**entries[0], "top_logprobs": entries}], usage=(12, 1)))
        if req.url.path == "/apply-template":
            return httpx.Response(200, json={"prompt": "<s>user: q\nassistant: "})
        if req.url.path == "/v1/completions" and body.get("echo"):
            forced = chr(int(next(iter(body["logit_bias"]))))
            tokens = [chr(b) for b in body["prompt"].encode()] + ([forced] if aligned else [])
            return httpx.Response(200, json={
                "choices": [{"text": body["prompt"] + forced, "logprobs": {
                    "tokens": tokens, "token_logprobs": [None] + [-1.0] * (len(tokens) - 1),
                    "top_logprobs": [None] * len(tokens)}}],
                "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": 1}})
        return httpx.Response(404)
    return handler, bodies


def test_echo_scores_whole_choices_and_refuses_a_multi_token_bias():
    handler, bodies = llama_server_mock(aligned=True)
    llm = mock_llm(handler)
    bias = TokenBias.from_mapping({ord("Y"): 2.0})
    with pytest.raises(ServerRejectedError, match="Could not score the choices exactly"):
        llm.score_choices(ChoiceRequest(user_prompt("q"), ("New York", "New Delhi"), bias=bias))
    scores = llm.score_choices(ChoiceRequest(user_prompt("q"), ("New York", "New Delhi")))
    assert scores.logprobs == pytest.approx([-8.0, -9.0])
    assert scores.token_counts == [8, 9] and scores.prompt_tokens == len("<s>user: q\nassistant: ")
    assert not scores.warnings
    echo = [b for p, b in bodies if p == "/v1/completions" and b.get("echo")]
    assert [b["prompt"] for b in echo] == ["<s>user: q\nassistant: New York",
                                           "<s>user: q\nassistant: New Delhi"]
    assert all(b["logit_bias"] == {str(ord("N")): 100.0} for b in echo)


def test_misaligned_echo_log_probs_are_refused_and_not_asked_again():
    handler, bodies = llama_server_mock(aligned=False)
    llm = mock_llm(handler)
    with pytest.raises(ServerRejectedError, match="misaligned"):
        llm.score_choices(ChoiceRequest(user_prompt("q"), ("New York", "New Delhi")))
    echoes = sum(1 for p, b in bodies if p == "/v1/completions" and b.get("echo"))
    with pytest.raises(ServerRejectedError, match="top 20"):  # Z is not among them
        llm.score_choices(ChoiceRequest(user_prompt("q"), ("A", "Z")))
    with pytest.raises(ServerRejectedError, match="misaligned"):
        llm.score_choices(ChoiceRequest(user_prompt("q"), ("New York", "New Delhi")))
    echoes_now = sum(1 for p, b in bodies if p == "/v1/completions" and b.get("echo"))
    assert echoes_now == echoes == 1  # the first echo showed they are unusable: not asked again


def test_choices_of_several_tokens_are_scored_by_echo():
    handler, bodies = llama_server_mock(aligned=True)
    scores = mock_llm(handler).score_choices(ChoiceRequest(user_prompt("q"), ("A", "Zed")))
    assert scores.logprobs == pytest.approx([-1.0, -3.0]) and scores.token_counts == [1, 3]
    assert not scores.warnings
    assert sum(1 for p, b in bodies if p == "/v1/completions" and b.get("echo")) == 2


# ----------------------------------------------------------------------------- real server
@pytest.fixture(scope="session")
def reference_llama(tiny_gguf):
    """The same GGUF in-process with all logits kept: ground truth for the server's log-probs."""
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(model_path=str(tiny_gguf), n_ctx=512, logits_all=True, n_threads=1,
                           n_threads_batch=1, flash_attn=True, verbose=False)


def reference_logprobs(llama, prompt: str) -> tuple[list[int], list[list[float]]]:
    """Token ids of `prompt` and the log-softmax row after each of them."""
    import numpy as np

    ids = llama.tokenize(prompt.encode(), add_bos=False, special=True)
    llama.reset()
    llama.eval(ids)
    rows = np.array(llama.scores[: len(ids)], dtype=np.float64)
    top = rows.max(axis=1, keepdims=True)
    return ids, (rows - top - np.log(np.exp(rows - top).sum(axis=1, keepdims=True))).tolist()


CAPITAL = user_prompt("What is the capital of France? Answer with one word.")


@pytest.mark.server
@pytest.mark.model
def test_server_logit_bias_flips_the_greedy_answer(any_llama_server, tiny_gguf):
    llm = OpenAICompatLLM(any_llama_server, "tiny", tokenizer=str(tiny_gguf),
                          context_window=2048)
    london = llm.tokenize("London")
    assert len(london) == 1
    plain, biased = llm.generate([
        GenerationRequest(CAPITAL, max_tokens=6),
        GenerationRequest(CAPITAL, max_tokens=6, bias=TokenBias.from_mapping({london[0]: 10.0}))])
    assert "Paris" in plain.text and not plain.text.startswith("London")
    assert biased.text.startswith("London")
    assert llm.count_chat_tokens(CAPITAL) == plain.prompt_tokens == biased.prompt_tokens


@pytest.mark.server
@pytest.mark.model
def test_server_tokenizer_equals_the_local_gguf_vocabulary(any_llama_server, tiny_gguf):
    server = OpenAICompatLLM(any_llama_server, "tiny", tokenizer="server")
    local = OpenAICompatLLM(any_llama_server, "tiny",
                            tokenizer=str(tiny_gguf))  # probes for a match
    texts = ["The Eiffel Tower was finished in 1889.", "  leading spaces\tand\ttabs\n",
             "naïve café, Zürich — 東京", "x"]
    for text in texts:
        ids = server.tokenize(text)
        assert ids == local.tokenize(text) and ids
        assert server.detokenize(ids) == local.detokenize(ids) == text
    assert local.vocab_size == 49152


@pytest.mark.server
@pytest.mark.model
def test_server_concurrent_requests_come_back_in_order(llama_server):
    llm = OpenAICompatLLM(llama_server, "tiny", concurrency=3)
    requests = [GenerationRequest(user_prompt(f"Repeat exactly one word: {w}"), max_tokens=3)
                for w in ("apple", "rocket", "violin")]
    together = llm.generate(requests)
    alone = [llm.generate([r])[0] for r in requests]
    assert [c.text for c in together] == [c.text for c in alone]
    assert len({c.text for c in together}) == 3


@pytest.mark.server
@pytest.mark.model
def test_server_rejects_a_prompt_beyond_its_context(llama_server):
    llm = OpenAICompatLLM(llama_server, "tiny", max_retries=1)
    with pytest.raises(ServerRejectedError, match="HTTP 400.*maximum context length is 2048"):
        llm.generate([request("word " * 2500, max_tokens=4)])


@pytest.mark.server
@pytest.mark.model
def test_server_first_token_scores_match_the_model(llama_server, tiny_gguf, reference_llama):
    llm = OpenAICompatLLM(llama_server, "tiny", tokenizer=str(tiny_gguf))
    choices = ("Paris", "The", "France")
    ids = [llm.tokenize(c)[0] for c in choices]
    bias = TokenBias.from_mapping({ids[2]: 4.0, ids[0]: -1.0})
    scores = llm.score_choices(ChoiceRequest(CAPITAL, choices, bias=bias))
    _, rows = reference_logprobs(reference_llama, llm.render_chat(CAPITAL))
    expected = [rows[-1][i] + bias.as_dict().get(i, 0.0) for i in ids]
    assert scores.token_counts == [1, 1, 1] and not scores.warnings
    assert scores.logprobs == pytest.approx(expected, abs=0.05)


@pytest.mark.server
@pytest.mark.model
def test_server_scores_multi_token_choices_token_by_token(llama_server, tiny_gguf,
                                                         reference_llama):
    llm = OpenAICompatLLM(llama_server, "tiny", tokenizer=str(tiny_gguf))
    messages = user_prompt("Capital of India?", system="Be brief.")
    choices = ("New York", "New Delhi")  # same first token: needs whole-choice scoring
    scores = llm.score_choices(ChoiceRequest(messages, choices))
    context = llm.render_chat(messages)
    context_ids, _ = reference_logprobs(reference_llama, context)
    expected = []
    for choice in choices:
        ids, rows = reference_logprobs(reference_llama, context + choice)
        expected.append(sum(rows[t - 1][ids[t]] for t in range(len(context_ids), len(ids))))
    assert scores.token_counts == [2, 2]
    # the server reads the second token after the first (one at a time), the reference in one
    # batch: the float sums differ a little
    assert scores.logprobs == pytest.approx(expected, abs=0.1)
    reference = ChoiceScores(choices, expected, [2, 2], 0, 0.0)
    assert scores.probabilities() == pytest.approx(reference.probabilities(), abs=0.02)


class SlowChat(BaseHTTPRequestHandler):
    """A healthy server that takes 0.5 s per chat completion."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(0.5)
        body = json.dumps(chat_reply()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_callers_sharing_the_backend_are_not_reported_unreachable(slow_server):
    # every answer comes within 0.5 s, inside the 1 s timeout; the wait for one of the
    # concurrency + 2 pooled connections is longer, and it is not the server's silence
    llm = OpenAICompatLLM(slow_server, "m", timeout=1.0, max_retries=0, concurrency=1)
    req = GenerationRequest(user_prompt("hi"), max_tokens=1)
    with ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(llm.generate, [req]) for _ in range(12)]
        errors = [f.exception() for f in futures]
    assert [repr(e) for e in errors if e] == []


def test_answer_without_usage_is_kept_when_no_tokenizer_is_available():
    # a server without a tokenize endpoint that omits `usage`: the estimate must not lose it
    def handler(req):
        if req.url.path == "/v1/chat/completions":
            return httpx.Response(200, json=chat_reply("Paris", usage=None))
        return httpx.Response(404)

    out = mock_llm(handler).generate([GenerationRequest(user_prompt("Capital?"))])[0]
    assert out.text == "Paris"


def test_llama_server_tokenize_does_not_parse_control_tokens():
    # llama-server's /tokenize parses control-token markup unless "parse_special": false
    def handler(req):
        body = json.loads(req.content) if req.content else {}
        if req.url.path == "/tokenize":
            text = body["content"]
            if body.get("parse_special", True):
                head, sep, tail = text.partition("<|im_end|>")
                if sep:
                    return httpx.Response(200, json={"tokens": list(head.encode()) + [2]
                                                     + list(tail.encode())})
            return httpx.Response(200, json={"tokens": list(text.encode())})
        return httpx.Response(404)

    llm = mock_llm(handler)
    passage = "x<|im_end|>"
    assert llm.tokenize(passage) == list(passage.encode())  # not the end-of-turn id


@pytest.mark.parametrize(("tokenize_path", "reply", "expected"), [
    ("/extras/tokenize", {"tokens": [1]}, {"repeat_penalty": 1.0}),  # llama-cpp-python
    ("/tokenize", {"tokens": [5, 6]}, {"repeat_penalty": 1.0}),  # llama-server
    ("/tokenize", {"tokens": [5, 6], "count": 2, "max_model_len": 8192},
     {"repetition_penalty": 1.0}),  # vLLM
    (None, None, {}),  # no tokenize endpoint (OpenAI): nothing it would refuse
])
def test_completions_switch_off_the_engines_default_repeat_penalty(tokenize_path, reply,
                                                                     expected):
    bodies = []

    def handler(req):
        if req.url.path == tokenize_path:
            return httpx.Response(200, json=reply)
        if req.url.path.endswith("completions"):
            bodies.append(json.loads(req.content))
            return httpx.Response(200, json=chat_reply("ok"))
        return httpx.Response(404, json={"error": {"message": "not found"}})

    llm = mock_llm(handler)
    llm.generate([request(), request("again")])
    penalties = [{k: v for k, v in b.items() if k.endswith("penalty")} for b in bodies]
    assert penalties == [expected, expected]

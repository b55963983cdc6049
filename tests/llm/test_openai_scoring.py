"""OpenAICompatLLM choice scoring that is exact or refuses, its tokenizer caches and its context
window, on fake servers (httpx.MockTransport); then parity with the embedded backend on the
tiny model behind a real `python -m llama_cpp.server` (marked `server` and `model`)."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from faithrag.errors import ConfigError, ServerRejectedError
from faithrag.llm.base import ChoiceRequest, Message, TokenBias, user_prompt
from faithrag.llm.openai import OpenAICompatLLM

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
    as llama-cpp-python and vLLM do; `logprobs=False` imitates a server that returns none."""

    def __init__(self, logprobs: bool = True, chat_text: str = "ok"):
        self.logprobs = logprobs
        self.chat_text = chat_text
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
            return httpx.Response(200, json=self.complete(body))
        return httpx.Response(404)

    def complete(self, body: dict) -> dict:
        values = byte_logprobs(body["prompt"])
        bias = {int(k): v for k, v in (body.get("logit_bias") or {}).items()}
        token = max(range(len(values)), key=lambda b: values[b] + bias.get(b, 0.0))
        piece = decode([token])
        choice: dict = {"index": 0, "text": piece, "finish_reason": "length"}
        if self.logprobs and body.get("logprobs") is not None:
            ranked = sorted(range(len(values)), key=lambda b: -values[b])[:body["logprobs"]]
            top = {decode([b]): values[b] for b in ranked}
            choice["logprobs"] = {"tokens": [piece], "token_logprobs": [values[token]],
                                  "top_logprobs": [{**top, piece: values[token]}],
                                  "text_offset": [len(body["prompt"])]}
        return {"choices": [choice], "usage": {"prompt_tokens": len(body["prompt"].encode()),
                                               "completion_tokens": 1}}

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.calls if p == path)


def server_llm(server: ForcingServer, **kwargs) -> OpenAICompatLLM:
    return OpenAICompatLLM(BASE, "m", transport=httpx.MockTransport(server), backoff=0.001,
                           **kwargs)


def exact_logprob(context: str, choice: str) -> float:
    """What an exact scorer must give: each byte of `choice` (no word of WORDS in it) under
    the made-up model."""
    return sum(byte_logprobs(context + choice[:k])[b] for k, b in enumerate(choice.encode()))


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
    probes = [b for p, b in server.calls if p == "/v1/completions" and "faithrag" in b["prompt"]]
    assert len(probes) == 2  # top log-probs, then one forced token: once per backend
    forced = [b for p, b in server.calls if p == "/v1/completions" and b not in probes]
    # "New " is shared by two choices: its four tokens are asked once, and the second call
    # asks nothing again
    assert len(forced) == len({(context + c[:k], c[k]) for c in request.choices
                               for k in range(len(c))})
    assert all(b["max_tokens"] == 1 and len(b["logit_bias"]) == 1 for b in forced)


def test_a_bias_is_added_exactly_when_each_choice_is_one_token_at_one_position():
    server = ForcingServer()
    bias = TokenBias.from_mapping({ord("B"): 2.5, ord("Z"): -4.0})
    scores = server_llm(server).score_choices(
        ChoiceRequest(user_prompt("q"), ("A", "B", "C"), "A: ", bias))
    row = byte_logprobs("<s>user: q\nassistant: A: ")
    assert scores.logprobs == pytest.approx([row[65], row[66] + 2.5, row[67]])
    with pytest.raises(ServerRejectedError, match="Could not score the choices exactly"):
        server_llm(ForcingServer()).score_choices(
            ChoiceRequest(user_prompt("q"), ("Bee", "Cat"), "A: ", bias))


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
                                    use_cache=False)
    result = pipeline.run("Which city is the capital of Australia?",
                          choices=["Canberra", "Darwin", "Sydney"])
    assert result.answer.text in ("Canberra", "Darwin", "Sydney")
    tokenizer_calls = server.count("/tokenize") + server.count("/detokenize")
    distinct_texts = len({b["content"] for p, b in server.calls if p == "/tokenize"})
    assert tokenizer_calls == distinct_texts  # one per text (the flavour probe is one)
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
def test_server_option_probabilities_equal_the_embedded_backends(llama_server, tiny_gguf):
    from faithrag.llm.llamacpp import LlamaCppLLM

    server = OpenAICompatLLM(llama_server, "tiny", tokenizer=str(tiny_gguf), context_window=2048)
    embedded = LlamaCppLLM(str(tiny_gguf), n_ctx=2048, n_threads=1)
    one_token = ("Canberra", "Darwin", "Sydney")  # " Canberra" etc. are single tokens
    bias = TokenBias.from_mapping({t: 3.0 for c in ("Darwin", "Sydney")
                                   for t in server.tokenize(" " + c)})
    requests = [ChoiceRequest(DARWIN, one_token, "Answer: "),
                ChoiceRequest(DARWIN, one_token, "Answer: ", bias),
                ChoiceRequest(DARWIN, ("New Delhi", "New York", "Canberra"), "Answer: ")]
    for request in requests:
        over_http, in_process = server.score_choices(request), embedded.score_choices(request)
        assert over_http.token_counts == in_process.token_counts
        assert over_http.probabilities() == pytest.approx(in_process.probabilities(), abs=0.02)
        assert over_http.best == in_process.best
    assert server._forced_usable is True


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

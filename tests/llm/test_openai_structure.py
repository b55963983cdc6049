"""Structured output over OpenAI-compatible servers: the forms sent, the fallback when a server
refuses them (said once), and llama.cpp's two real servers returning schema-valid JSON."""

from __future__ import annotations

import json
import re
import threading

import httpx
import pytest

from faithrag.errors import ServerRejectedError
from faithrag.llm.base import GenerationRequest, user_prompt
from faithrag.llm.grammar import gbnf_for
from faithrag.llm.openai import OpenAICompatLLM
from faithrag.llm.openai import structure as structure_module
from faithrag.methods.schemas import choice_answer_schema, label_grammar

BASE = "http://llm.test/v1"
SCHEMA = choice_answer_schema(["Paris", "London"], max_tokens=64)
REPLY = '{"Reason": "It is.", "Answer": "Paris"}'


def reply(text: str = REPLY) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3}}


class Server:
    """A mock chat endpoint (no tokenize endpoint, as OpenAI) that refuses the structure forms
    in `refuses` with HTTP 400 and records every body it got."""

    def __init__(self, refuses: set[str] = frozenset(), text: str = REPLY):
        self.refuses = set(refuses)
        self.text = text
        self.bodies: list[dict] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("completions"):  # the server-kind probe: none here
            return httpx.Response(404, json={"error": {"message": "not found"}})
        body = json.loads(request.content)
        with self._lock:
            self.bodies.append(body)
        form = form_of(body)
        if form in self.refuses:
            return httpx.Response(400, json={"error": {"message": f"{form} unsupported"}})
        return httpx.Response(200, json=reply(self.text))

    def llm(self, **kwargs) -> OpenAICompatLLM:
        return OpenAICompatLLM(BASE, "m", transport=httpx.MockTransport(self), backoff=0.001,
                               concurrency=1, **kwargs)


def ask(**kwargs) -> GenerationRequest:
    return GenerationRequest(user_prompt("Capital of France?"), max_tokens=64,
                             purpose="answer", **kwargs)


def test_a_schema_goes_as_openai_json_schema_response_format():
    server = Server()
    completion = server.llm().generate([ask(schema=SCHEMA)])[0]
    assert server.bodies[0]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}
    assert completion.text == REPLY and completion.warnings == []


@pytest.fixture
def no_llama_cpp_python(monkeypatch):
    """The OpenAI backend as on a core install: no schema-to-GBNF converter here."""
    def no_converter(schema, grammar):
        raise ImportError("No module named 'llama_cpp'")

    monkeypatch.setattr(structure_module, "gbnf_for", no_converter)
    structure_module.schema_gbnf.cache_clear()
    yield
    structure_module.schema_gbnf.cache_clear()


def form_of(body: dict) -> str | None:
    return body.get("response_format", {}).get("type") or ("grammar" if "grammar" in body
                                                           else None)


def test_a_server_refusing_json_schema_gets_the_schema_compiled_to_gbnf_from_then_on():
    server = Server(refuses={"json_schema"})
    llm = server.llm()
    llm.generate([ask(schema=SCHEMA)])
    llm.generate([ask(schema=SCHEMA)])
    assert [form_of(b) for b in server.bodies] == ["json_schema", "grammar", "grammar"]
    assert server.bodies[1]["grammar"] == gbnf_for(SCHEMA, None)
    assert "response_format" not in server.bodies[1]


def test_a_server_refusing_json_schema_and_grammar_gets_llama_cpp_pythons_json_object_form():
    server = Server(refuses={"json_schema", "grammar"})
    llm = server.llm()
    llm.generate([ask(schema=SCHEMA)])
    llm.generate([ask(schema=SCHEMA)])
    assert [form_of(b) for b in server.bodies] == [
        "json_schema", "grammar", "json_object", "json_object"]  # refused once, then skipped
    assert server.bodies[2]["response_format"]["schema"] == SCHEMA


def test_without_llama_cpp_python_here_a_refused_json_schema_goes_as_json_object(
        no_llama_cpp_python):
    server = Server(refuses={"json_schema"})
    completion = server.llm().generate([ask(schema=SCHEMA)])[0]
    assert [form_of(b) for b in server.bodies] == ["json_schema", "json_object"]
    assert completion.warnings == []


def test_without_llama_cpp_python_a_schema_no_form_left_can_carry_says_what_would(
        no_llama_cpp_python):
    server = Server(refuses={"json_schema", "json_object"})
    llm = server.llm()
    first, second = (llm.generate([ask(schema=SCHEMA)])[0] for _ in range(2))
    assert [form_of(b) for b in server.bodies] == ["json_schema", "json_object", None, None]
    assert len(first.warnings) == 1 and "pip install 'faithrag[llamacpp]'" in first.warnings[0]
    assert second.warnings == []


def test_a_quoted_option_never_goes_as_json_object_whose_converter_miswrites_it():
    # llama-cpp-python's server compiles '"The Merger"' into a grammar it cannot parse, and aborts
    quoted = choice_answer_schema(['"The Merger"', "back\\slash"], max_tokens=64)
    server = Server(refuses={"json_schema", "grammar"})
    llm = server.llm()
    first = llm.generate([ask(schema=quoted)])[0]
    second = llm.generate([ask(schema=SCHEMA)])[0]
    assert [form_of(b) for b in server.bodies] == ["json_schema", "grammar", None, "json_object"]
    assert len(first.warnings) == 1 and "pip install 'faithrag[llamacpp]'" in first.warnings[0]
    assert second.warnings == []  # the other schemas still go constrained


def test_a_server_refusing_every_form_is_asked_unconstrained_and_it_is_said_once():
    server = Server(refuses={"json_schema", "grammar", "json_object"})
    llm = server.llm()
    first = llm.generate([ask(schema=SCHEMA)])[0]
    second = llm.generate([ask(schema=SCHEMA)])[0]
    assert [form_of(b) for b in server.bodies] == [
        "json_schema", "grammar", "json_object", None, None]  # no more attempts with a structure
    assert len(first.warnings) == 1 and "refused the request's schema" in first.warnings[0]
    assert second.warnings == [] and second.text == REPLY


def test_a_grammar_goes_as_grammar_and_guided_grammar_and_falls_back_on_its_own():
    grammar = label_grammar("SUPPORT", ("SUPPORTED", "UNSUPPORTED"))
    server = Server(refuses={"grammar"}, text="SUPPORT: SUPPORTED")
    llm = server.llm()
    llm.generate([ask(grammar=grammar)])
    assert server.bodies[0]["grammar"] == grammar == server.bodies[0]["guided_grammar"]
    assert "grammar" not in server.bodies[1]
    llm.generate([ask(schema=SCHEMA)])  # schemas are still sent: another kind of structure
    assert server.bodies[2]["response_format"]["type"] == "json_schema"


def test_an_error_that_the_plain_request_gets_too_is_raised_and_blames_no_form():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        return httpx.Response(400, json={"error": {"message": "prompt too long"}})

    llm = OpenAICompatLLM(BASE, "m", transport=httpx.MockTransport(handler), backoff=0.001)
    with pytest.raises(ServerRejectedError):
        llm.generate([ask(schema=SCHEMA)])
    assert llm._forms.refused == set()


def test_a_reply_to_a_schema_that_is_not_json_says_once_the_server_may_ignore_it():
    server = Server(text="Paris, obviously.")
    llm = server.llm()
    first, second = (llm.generate([ask(schema=SCHEMA)])[0] for _ in range(2))
    assert len(first.warnings) == 1 and "may ignore response_format" in first.warnings[0]
    assert second.warnings == []


def test_a_schema_reply_cut_at_a_stop_string_is_not_taken_for_an_ignored_schema():
    # cot_json's scored mode stops its constrained reply at the "Answer" key
    server = Server(text='{"Reason": "It is the capital.", ')
    completion = server.llm().generate([ask(schema=SCHEMA, stop=('"Answer"',))])[0]
    assert completion.warnings == []


def test_a_reply_with_no_json_start_is_flagged_even_when_the_request_had_stop_strings():
    server = Server(text="Paris, obviously.")
    completion = server.llm().generate([ask(schema=SCHEMA, stop=('"Answer"',))])[0]
    assert "may ignore response_format" in completion.warnings[0]


def test_constrain_false_sends_no_structure():
    server = Server()
    server.llm(constrain=False).generate([ask(schema=SCHEMA), ask(grammar='root ::= "x"')])
    assert all("response_format" not in b and "grammar" not in b for b in server.bodies)


def test_a_structured_request_asks_for_the_constrained_cap_and_its_fallback_for_max_tokens(
        monkeypatch):
    server = Server(refuses={"json_schema"})
    llm = server.llm()  # as if it knew its window and tokenizer:
    monkeypatch.setattr(OpenAICompatLLM, "context_window", property(lambda self: 4096))
    monkeypatch.setattr(llm, "count_chat_tokens", lambda messages: 4000)
    llm.generate([ask(schema=SCHEMA)])  # 96 tokens of room: 64 < cap < 3 × 64
    monkeypatch.setattr(llm, "count_chat_tokens", lambda messages: 100)
    llm.generate([ask(schema=SCHEMA)])  # room enough: 3 × 64
    server.refuses |= {"grammar", "json_object"}
    llm.generate([ask(schema=SCHEMA)])
    assert [(form_of(b), b["max_tokens"]) for b in server.bodies] == [
        ("json_schema", 96), ("grammar", 96), ("grammar", 192), ("grammar", 192),
        ("json_object", 192), (None, 64)]  # sent unconstrained: no structure bounds its reply


def test_a_structured_request_keeps_max_tokens_where_the_prompt_cannot_be_counted():
    server = Server()  # no tokenize endpoint, no local tokenizer
    server.llm(context_window=4096).generate([ask(schema=SCHEMA)])
    assert server.bodies[0]["max_tokens"] == 64


# ----------------------------------------------------------------------------- real server
@pytest.mark.model
@pytest.mark.server
def test_the_real_llama_cpp_servers_return_schema_valid_json(any_llama_server, tiny_gguf):
    llm = OpenAICompatLLM(any_llama_server, "tiny", tokenizer=str(tiny_gguf),
                          context_window=2048)
    # an option with quotes and a backslash: llama-cpp-python's own converter miswrites it
    schema = choice_answer_schema(["Paris", '"The City" of London', "Ber\\lin"], max_tokens=96)
    prompts = ["What is the capital of France?", "Which city is in Germany?",
               "Name a city on the Thames."]
    completions = llm.generate([
        GenerationRequest(user_prompt(f"{p} Options: Paris, London, Berlin. Reply in JSON."),
                          max_tokens=96, purpose="answer", schema=schema) for p in prompts])
    for completion in completions:
        value = json.loads(completion.text)
        assert set(value) == {"Reason", "Answer"} and value["Answer"] in schema[
            "properties"]["Answer"]["enum"]
        assert len(value["Reason"]) <= schema["properties"]["Reason"]["maxLength"]
        assert not any("unconstrained" in w for w in completion.warnings)
    # llama-server takes the OpenAI form; llama-cpp-python's server the GBNF compiled here
    flavour = llm._session.flavour().name
    assert llm._forms.refused == (set() if flavour == "llama-server" else {"json_schema"})
    grammar = label_grammar("SUPPORT", ("SUPPORTED", "PARTIAL", "UNSUPPORTED"))
    graded = llm.generate([GenerationRequest(user_prompt("Is the sky green?"), max_tokens=16,
                                             grammar=grammar)])[0]
    assert graded.text in {"SUPPORT: SUPPORTED", "SUPPORT: PARTIAL", "SUPPORT: UNSUPPORTED"}


@pytest.mark.model
@pytest.mark.server
def test_the_real_llama_cpp_servers_let_a_dense_constrained_reply_close_as_embedded(
        any_llama_server, tiny_gguf):
    llm = OpenAICompatLLM(any_llama_server, "tiny", tokenizer=str(tiny_gguf),
                          context_window=2048)
    grammar = 'root ::= [0-9]{30} "."'  # 31 tokens of the tiny model: one per digit
    [closed] = llm.generate([GenerationRequest(user_prompt("Count to a hundred."),
                                               max_tokens=12, grammar=grammar)])
    assert re.fullmatch(r"[0-9]{30}\.", closed.text), closed.text
    assert closed.finish_reason == "stop" and closed.completion_tokens > 12

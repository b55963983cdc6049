"""The OpenAI-compatible facade, driven by the official `openai` client against a real running
server (the fake LLM scripts the pipeline): plain and streamed answers, passages and stages in
the extension field, the trace and removed passages in the reply, models, errors and the key."""

from __future__ import annotations

import json

import pytest

from faithrag.llm.cancel import RunCancelled
from faithrag.llm.delegating import DelegatingLLM
from faithrag.llm.fake import FakeLLM
from faithrag.methods.base import RemovedPassage, RerankResult
from faithrag.methods.vanilla import VanillaRAG
from faithrag.pipeline import Pipeline
from faithrag.registry import PLAIN_RAG
from faithrag.server.stages import registered_stages

openai = pytest.importorskip("openai", reason="the openai client is not installed")

CANBERRA = "Canberra has been the capital of Australia since 1913."


def client_for(server, api_key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=api_key, max_retries=0,
                         timeout=30)


class DropLast:
    name = "drop_last"

    def rerank(self, question, passages, trace):
        with trace.step("rerank", self.name) as step:
            step.decision = "removed the last passage"
            return RerankResult(passages[:-1], [RemovedPassage(passages[-1], "contradicts p1")])


def test_the_last_user_message_is_answered_from_the_given_passages(start_server):
    llm = FakeLLM([("since 1913", "Canberra")], default="no evidence seen")
    server = start_server(llm=llm)
    reply = client_for(server).chat.completions.create(
        model="faithrag",
        messages=[{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "Capital of France?"},
                  {"role": "assistant", "content": "Paris"},
                  {"role": "user", "content": [{"type": "text",
                                                "text": "What is the capital of Australia?"}]}],
        extra_body={"faithrag": {"passages": [{"title": "Australia", "text": CANBERRA}]}})
    assert reply.object == "chat.completion" and reply.model == "faithrag"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content == "Canberra"
    assert reply.choices[0].finish_reason == "stop"
    extension = reply.model_extra["faithrag"]
    assert extension["question"] == "What is the capital of Australia?"
    assert [p["id"] for p in extension["passages"]] == ["p1"]
    assert extension["trace"]["steps"][0]["name"] == "vanilla"
    assert reply.usage.prompt_tokens == extension["trace"]["totals"]["prompt_tokens"] > 0
    (call,) = llm.calls
    assert "Capital of France?" not in call.messages[-1].content


def test_the_model_name_picks_the_method_and_the_extension_the_stages(start_server):
    server = start_server(llm=FakeLLM(default="[2] > [1]"))
    client = client_for(server)
    names = [m.id for m in client.models.list()]
    assert names == ["faithrag", *(f"faithrag/{m}" for m in registered_stages()["generator"])]
    reply = client.chat.completions.create(
        model="faithrag/closed_book", messages=[{"role": "user", "content": "Capital?"}],
        extra_body={"faithrag": {"rerank": "listwise", "k": 2,
                                 "passages": [{"text": "Sydney."}, {"text": CANBERRA}]}})
    steps = reply.model_extra["faithrag"]["trace"]["steps"]
    assert [(s["stage"], s["name"]) for s in steps] == [("rerank", "listwise"),
                                                         ("generate", "closed_book")]


def test_streaming_sends_the_answer_then_the_trace_and_removed_passages(start_server):
    def build(config, llm, retriever):
        return Pipeline(VanillaRAG(llm), reranker=DropLast())
    server = start_server(llm=FakeLLM(default="Canberra"), build=build)
    stream = client_for(server).chat.completions.create(
        model="faithrag", stream=True, messages=[{"role": "user", "content": "Capital?"}],
        extra_body={"faithrag": {"passages": [{"text": CANBERRA}, {"text": "Sydney is."}]}})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Canberra"
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert len({c.id for c in chunks}) == 1
    last = chunks[-1].model_extra["faithrag"]
    assert last["removed"] == [{"id": "p2", "reason": "contradicts p1", "text": "Sydney is."}]
    assert [p["id"] for p in last["passages"]] == ["p1"]
    assert chunks[-1].usage.total_tokens > 0


def test_the_official_client_reads_the_conflict_report_plain_and_streamed(start_server,
                                                                          conflict_stages,
                                                                          recording_build):
    server = start_server(llm=FakeLLM(default="Canberra"), build=recording_build)
    request = {"model": "faithrag", "messages": [{"role": "user", "content": "Capital?"}],
               "extra_body": {"faithrag": {
                   "rerank": "test_sides", "detect": "test_silent", "on_conflict": "resolve",
                   "passages": [{"title": "Canberra", "text": CANBERRA},
                                {"title": "Sydney", "text": "Sydney is the capital."}]}}}
    client = client_for(server)
    reply = client.chat.completions.create(**request)
    (conflict,) = reply.model_extra["faithrag"]["conflicts"]
    assert [(side["answer"], side["passages"]) for side in conflict["sides"]] == [
        ("Canberra", ["p1"]), ("Sydney", ["p2"])]
    assert conflict["action"] == "removed"
    assert [c["status"] for c in reply.model_extra["faithrag"]["conflict_checks"]] == [
        "conflict", "no_conflict", "could_not_tell"]
    chunks = list(client.chat.completions.create(stream=True, **request))
    assert chunks[-1].model_extra["faithrag"]["conflicts"] == [conflict]
    assert (recording_build.configs[-1].pipeline.detect,
            recording_build.configs[-1].pipeline.on_conflict) == ("test_silent", "resolve")


def test_a_failure_after_the_stream_started_is_raised_by_the_client(start_server):
    def fail(request):
        raise RuntimeError("the model fell over")
    server = start_server(llm=FakeLLM(fail))
    stream = client_for(server).chat.completions.create(
        model="faithrag", stream=True, messages=[{"role": "user", "content": "Capital?"}])
    with pytest.raises(openai.APIError, match="the model fell over"):
        list(stream)


@pytest.mark.parametrize("kwargs, message", [
    ({"model": "gpt-4o"}, "Unknown model 'gpt-4o'"),
    ({"n": 2}, "n=2 is not supported"),
    ({"messages": [{"role": "system", "content": "Be brief."}]}, "no user message"),
    ({"extra_body": {"faithrag": {"rerank": "shuffle"}}}, "Unknown rerank 'shuffle'"),
    ({"extra_body": {"faithrag": {"on_conflict": "guess"}}}, "Unknown on_conflict 'guess'"),
    ({"extra_body": {"faithrag": {"passages": "text"}}}, "'faithrag.passages'"),
])
def test_bad_requests_are_a_400_the_client_raises(start_server, kwargs, message):
    llm = FakeLLM(default="x")
    server = start_server(llm=llm)
    request = {"model": "faithrag", "messages": [{"role": "user", "content": "q?"}], **kwargs}
    with pytest.raises(openai.BadRequestError, match=message):
        client_for(server).chat.completions.create(**request)
    assert llm.calls == []


def test_the_api_key_is_the_clients_key(start_server):
    server = start_server(api_key="s3cret")
    with pytest.raises(openai.AuthenticationError):
        client_for(server, "wrong").models.list()
    reply = client_for(server, "s3cret").chat.completions.create(
        model="faithrag", messages=[{"role": "user", "content": "q?"}])
    assert reply.choices[0].message.content == "Canberra"


@pytest.mark.model
def test_the_tiny_model_answers_the_official_client_plain_and_streamed(start_server, tiny_gguf):
    from faithrag.config import Config
    from faithrag.llm import load_llm

    config = Config.load(overrides={**PLAIN_RAG, "llm.model": str(tiny_gguf), "llm.n_ctx": 2048,
                                    "llm.n_threads": 1})
    client = client_for(start_server(llm=load_llm(config.llm), config=config))
    request = {"model": "faithrag", "messages": [
        {"role": "user", "content": "When was the Aldermoor Bridge opened?"}],
        "extra_body": {"faithrag": {"passages": [
            {"title": "Aldermoor Bridge",
             "text": "The Aldermoor Bridge over the river Wend was opened in 1887."}]}}}
    reply = client.chat.completions.create(**request)
    answer = reply.choices[0].message.content
    assert isinstance(answer, str) and answer
    (step,) = reply.model_extra["faithrag"]["trace"]["steps"]
    assert step["llm_calls"][0]["completion_tokens"] > 0
    assert reply.usage.completion_tokens == step["llm_calls"][0]["completion_tokens"]
    chunks = list(client.chat.completions.create(stream=True, **request))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == answer  # temperature 0
    assert chunks[-1].model_extra["faithrag"]["passages"][0]["id"] == "p1"


def test_a_long_run_keeps_the_stream_alive_with_comments(start_server, monkeypatch):
    import threading
    import time

    import httpx

    from faithrag.server import app

    monkeypatch.setattr(app, "KEEP_ALIVE_SECONDS", 0.05)
    done = threading.Event()

    def slow(request):
        done.wait(0.5)
        return "Canberra"
    server = start_server(llm=FakeLLM(slow))
    events = []
    started = time.monotonic()
    with httpx.stream("POST", server.url + "/v1/chat/completions", timeout=30, json={
            "model": "faithrag", "stream": True,
            "messages": [{"role": "user", "content": "Capital?"}]}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line]
    assert time.monotonic() - started >= 0.5
    assert events[0].startswith("data: ") and '"role": "assistant"' in events[0]
    assert ": running" in events[1:-3]
    assert events[-1] == "data: [DONE]"


class TenCalls:
    """A generator that asks the model ten times, one call after the other."""

    name = "ten_calls"

    def __init__(self, llm):
        self.llm = llm

    def generate(self, question, passages, trace):
        from faithrag.llm.base import GenerationRequest, user_prompt
        from faithrag.types import Answer

        for _ in range(10):
            text = self.llm.generate([GenerationRequest(user_prompt(question.text))])[0].text
        return Answer(text=text)


def test_a_stream_whose_client_disconnects_stops_its_model_work(start_server):
    import json
    import socket
    import time

    def slow(request):
        time.sleep(0.3)
        return "Canberra"
    def build(config, llm, retriever):  # k=7 asks ten times, any other k once
        return Pipeline(TenCalls(llm) if config.retrieval.k == 7 else VanillaRAG(llm))
    llm = FakeLLM(slow)
    server = start_server(llm=llm, build=build)
    body = json.dumps({"model": "faithrag", "stream": True, "faithrag": {"k": 7},
                       "messages": [{"role": "user", "content": "Capital?"}]}).encode()
    with socket.create_connection((server.server.host, server.server.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        received = b""
        while b'"role": "assistant"' not in received:  # the stream has started
            received += sock.recv(65536)
        time.sleep(0.4)  # the run is under way
    started = time.monotonic()
    reply = server.ask({"question": "Capital?", "passages": [{"text": CANBERRA}]})
    waited = time.monotonic() - started
    assert reply.status == 200
    assert waited < 1.5  # not the abandoned run's remaining 2-3 s of model calls
    assert len(llm.calls) <= 4  # the abandoned run stopped at its next call, then this one


def test_the_official_client_retrieves_one_model_and_gets_a_404_for_another(start_server):
    import openai

    server = start_server()
    client = client_for(server)
    for name in ("faithrag", "faithrag/vanilla"):
        model = client.models.retrieve(name)
        assert (model.id, model.object, model.owned_by) == (name, "model", "faithrag")
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("faithrag/nonsense")
    assert "GET /v1/models lists them" in str(info.value)


SIDES_PASSAGES = [{"title": "Canberra", "text": CANBERRA},
                  {"title": "Sydney", "text": "Sydney is the capital."}]
SUMMARY = "[faithrag: conflicts=passage_vs_passage; sides=2; actions=removed]"


def content_of(chunks) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_cuts_the_reply_and_the_finish_reason_says_so(start_server, field):
    llm = FakeLLM(default="Canberra is the capital")
    client = client_for(start_server(llm=llm))
    request = {"model": "faithrag", "messages": [{"role": "user", "content": "Capital?"}],
               "extra_body": {"faithrag": {"passages": [{"text": CANBERRA}]}}}
    reply = client.chat.completions.create(**request, **{field: 8})
    assert reply.choices[0].message.content == "Canberra"  # one byte per fake token
    assert reply.choices[0].finish_reason == "length"
    assert llm.calls[-1].max_tokens == 8
    assert reply.usage.completion_tokens == 8 == reply.model_extra["faithrag"]["trace"][
        "totals"]["completion_tokens"]
    chunks = list(client.chat.completions.create(stream=True, **request, **{field: 8}))
    assert content_of(chunks) == "Canberra" and chunks[-1].choices[0].finish_reason == "length"
    whole = client.chat.completions.create(**request)
    assert (whole.choices[0].message.content, whole.choices[0].finish_reason) == (
        "Canberra is the capital", "stop")


def test_a_json_schema_reply_is_parsed_by_the_official_client(start_server):
    from pydantic import BaseModel

    class Capital(BaseModel):
        city: str
        since: int

    llm = FakeLLM([("JSON schema of the reply", '{"city": "Canberra", "since": 1913}')],
                  default="Canberra")
    client = client_for(start_server(llm=llm))
    reply = client.chat.completions.parse(
        model="faithrag", messages=[{"role": "user", "content": "Capital since when?"}],
        response_format=Capital, extra_body={"faithrag": {"passages": [{"text": CANBERRA}]}})
    assert reply.choices[0].message.parsed == Capital(city="Canberra", since=1913)
    assert llm.calls[-1].schema["required"] == ["city", "since"]
    object_reply = client.chat.completions.create(
        model="faithrag", messages=[{"role": "user", "content": "Capital?"}],
        response_format={"type": "json_object"})
    assert json.loads(object_reply.choices[0].message.content) == {"city": "Canberra",
                                                                   "since": 1913}
    assert llm.calls[-1].schema == {"type": "object"}


@pytest.mark.parametrize("kwargs, field", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "'tools'"),
    ({"tool_choice": "auto"}, "'tool_choice'"),
    ({"extra_body": {"functions": [{"name": "f"}]}}, "'functions'"),
    ({"logprobs": True}, "'logprobs'"),
    ({"stop": ["\n"]}, "'stop'"),
    ({"presence_penalty": 0.5}, "'presence_penalty'"),
    ({"extra_body": {"guided_json": {}}}, "'guided_json'"),
    ({"max_tokens": 5, "max_completion_tokens": 6}, "disagree"),
    ({"response_format": {"type": "json_schema"}}, "no json_schema"),
    ({"response_format": {"type": "xml"}}, "'response_format.type'"),
])
def test_fields_the_facade_does_not_carry_out_are_a_400_naming_them(start_server, kwargs,
                                                                     field):
    llm = FakeLLM(default="x")
    client = client_for(start_server(llm=llm))
    with pytest.raises(openai.BadRequestError, match=field) as info:
        client.chat.completions.create(
            model="faithrag", messages=[{"role": "user", "content": "q?"}], **kwargs)
    assert info.value.body["type"] == "invalid_request_error"
    assert llm.calls == []


def test_fields_clients_send_anyway_are_taken(start_server):
    reply = client_for(start_server()).chat.completions.create(
        model="faithrag", messages=[{"role": "user", "content": "q?"}], temperature=0.7,
        top_p=0.9, seed=3, user="someone", n=1, logprobs=False, tools=None,
        response_format={"type": "text"}, stream_options=None)
    assert reply.choices[0].message.content == "Canberra"


def test_the_reply_streams_as_the_final_generation_is_decoded(start_server):
    import time

    answer = "Canberra, the capital since 1913"
    server = start_server(llm=FakeLLM(default=answer, token_seconds=0.02))
    started = time.monotonic()
    arrivals = []
    for chunk in client_for(server).chat.completions.create(
            model="faithrag", stream=True, messages=[{"role": "user", "content": "Capital?"}],
            extra_body={"faithrag": {"passages": [{"text": CANBERRA}]}}):
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append((time.monotonic() - started, chunk.choices[0].delta.content))
    total = time.monotonic() - started
    assert "".join(text for _, text in arrivals) == answer
    assert len(arrivals) > 5  # token by token, not one chunk at the end
    assert arrivals[0][0] < total / 2  # 32 tokens of 20 ms: the first is out early


def test_the_conflict_summary_ends_the_text_reply_unless_switched_off(start_server,
                                                                      conflict_stages):
    server = start_server(llm=FakeLLM(default="Canberra"))
    client = client_for(server)
    request = {"model": "faithrag", "messages": [{"role": "user", "content": "Capital?"}]}
    options = {"rerank": "test_sides", "passages": SIDES_PASSAGES}
    reply = client.chat.completions.create(**request, extra_body={"faithrag": options})
    assert reply.choices[0].message.content == f"Canberra\n\n{SUMMARY}"
    chunks = list(client.chat.completions.create(stream=True, **request,
                                                 extra_body={"faithrag": options}))
    assert content_of(chunks) == f"Canberra\n\n{SUMMARY}"
    quiet = client.chat.completions.create(**request,
                                           extra_body={"faithrag": {**options, "summary": False}})
    assert quiet.choices[0].message.content == "Canberra"
    assert quiet.model_extra["faithrag"]["conflicts"][0]["kind"] == "passage_vs_passage"
    plain = client.chat.completions.create(**request,
                                           extra_body={"faithrag": {"passages": SIDES_PASSAGES}})
    assert plain.choices[0].message.content == "Canberra"  # no conflict, no line


def test_the_server_setting_switches_the_summary_off(start_server, conflict_stages):
    from faithrag.config import Config

    config = Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake",
                                    "server.conflict_summary": False})
    client = client_for(start_server(llm=FakeLLM(default="Canberra"), config=config))
    request = {"model": "faithrag", "messages": [{"role": "user", "content": "Capital?"}],
               "extra_body": {"faithrag": {"rerank": "test_sides", "passages": SIDES_PASSAGES}}}
    assert client.chat.completions.create(**request).choices[0].message.content == "Canberra"
    request["extra_body"]["faithrag"]["summary"] = True
    assert client.chat.completions.create(**request).choices[0].message.content.endswith(SUMMARY)


def test_langchains_chat_openai_gets_answers_the_summary_and_structured_output(start_server,
                                                                               conflict_stages):
    langchain_openai = pytest.importorskip("langchain_openai")
    from pydantic import BaseModel

    class Capital(BaseModel):
        city: str

    llm = FakeLLM([("JSON schema of the reply", '{"city": "Canberra"}')], default="Canberra")
    server = start_server(llm=llm)
    chat = langchain_openai.ChatOpenAI(model="faithrag", base_url=server.url + "/v1",
                                       api_key="unused", max_retries=0, timeout=30)
    assert chat.invoke("Capital of Australia?").content == "Canberra"  # the defaults it sends
    assert "".join(c.content for c in chat.stream("Capital of Australia?")) == "Canberra"
    with_sides = chat.bind(extra_body={"faithrag": {"rerank": "test_sides",
                                                    "passages": SIDES_PASSAGES}})
    message = with_sides.invoke("Capital of Australia?")
    assert message.content.splitlines()[-1] == SUMMARY
    assert chat.with_structured_output(Capital, method="json_schema").invoke(
        "Capital of Australia?") == Capital(city="Canberra")
    with pytest.raises(openai.BadRequestError, match="'tools' is not supported"):
        chat.with_structured_output(Capital, method="function_calling").invoke("Capital?")


TINY_REQUEST = {"model": "faithrag", "messages": [
    {"role": "user", "content": "When was the Aldermoor Bridge opened, and by whom?"}],
    "extra_body": {"faithrag": {"passages": [
        {"title": "Aldermoor Bridge", "text": "The Aldermoor Bridge over the river Wend was "
         "opened in 1887 by the mayor, Edith Carrow, after six years of building."}]}}}


class Outcomes(DelegatingLLM):
    """The served model, recording how each generation call ended: "done" or "cancelled"."""

    def __init__(self, llm):
        super().__init__(llm)
        self.outcomes: list[str] = []

    def generate(self, requests):
        try:
            completions = super().generate(requests)
        except RunCancelled:
            self.outcomes.append("cancelled")
            raise
        self.outcomes.append("done")
        return completions


@pytest.fixture
def tiny_server(start_server, tiny_gguf):
    from faithrag.config import Config
    from faithrag.llm import load_llm

    # plain RAG: the reply streams as the answer is decoded (the default policy, by_kind,
    # rewrites the answer after the run, so its reply arrives whole)
    config = Config.load(overrides={**PLAIN_RAG, "llm.model": str(tiny_gguf), "llm.n_ctx": 2048,
                                    "llm.n_threads": 1, "generation.answer_tokens": 64})
    llm = Outcomes(load_llm(config.llm))
    return client_for(start_server(llm=llm, config=config)), llm


@pytest.mark.model
def test_the_tiny_models_first_chunk_comes_before_its_answer_is_complete(tiny_server):
    import time

    client, _ = tiny_server
    started = time.monotonic()
    arrivals = []
    for chunk in client.chat.completions.create(stream=True, **TINY_REQUEST):
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic() - started)
    total = time.monotonic() - started
    print(f"time to first chunk {arrivals[0]:.3f} s of {total:.3f} s, {len(arrivals)} chunks")
    assert len(arrivals) > 1 and arrivals[0] < total


@pytest.mark.model
def test_the_tiny_model_writes_json_that_langchain_and_the_client_parse(tiny_server):
    from pydantic import BaseModel, Field

    class Opening(BaseModel):  # a bound on the name: the 135M model may repeat itself in it
        year: int
        opened_by: str = Field(max_length=60)

    client, _ = tiny_server
    reply = client.chat.completions.parse(response_format=Opening, **TINY_REQUEST)
    parsed = reply.choices[0].message.parsed
    assert isinstance(parsed, Opening)
    assert reply.model_extra["faithrag"]["trace"]["steps"][-1]["name"] == "json_schema"
    langchain_openai = pytest.importorskip("langchain_openai")
    chat = langchain_openai.ChatOpenAI(model="faithrag", base_url=str(client.base_url),
                                       api_key="unused", max_retries=0, timeout=60,
                                       extra_body=TINY_REQUEST["extra_body"])
    structured = chat.with_structured_output(Opening, method="json_schema")
    assert isinstance(structured.invoke(TINY_REQUEST["messages"][0]["content"]), Opening)


@pytest.mark.model
def test_the_tiny_models_stream_stops_mid_answer_when_its_client_goes(tiny_server):
    import time

    client, llm = tiny_server
    stream = client.chat.completions.create(stream=True, **TINY_REQUEST)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break  # the first piece of the answer: the final generation is under way
    stream.close()
    deadline = time.monotonic() + 30
    while not llm.outcomes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert llm.outcomes == ["cancelled"]  # stopped inside its call, at its next token
    reply = client.chat.completions.create(**TINY_REQUEST)
    assert reply.choices[0].message.content and llm.outcomes == ["cancelled", "done"]

"""The OpenAI-compatible facade, driven by the official `openai` client against a real running
server (the fake LLM scripts the pipeline): plain and streamed answers, passages and stages in
the extension field, the trace and removed passages in the reply, models, errors and the key."""

from __future__ import annotations

import pytest

from faithrag.llm.fake import FakeLLM
from faithrag.methods.base import RemovedPassage, RerankResult
from faithrag.methods.vanilla import VanillaRAG
from faithrag.pipeline import Pipeline
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
    assert names == ["faithrag", *(f"faithrag/{m}" for m in registered_stages().methods)]
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

    config = Config.load(overrides={"llm.model": str(tiny_gguf), "llm.n_ctx": 2048,
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

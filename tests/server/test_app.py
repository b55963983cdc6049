"""The HTTP API end to end over a real socket, around the fake LLM: answers, traces, every kind
of bad request, errors raised inside the pipeline, concurrent clients, and the passages a
response lists being exactly the ones in the generator's prompt (checked against the prompt the
model received, with 1,000 passages posted and a context window that holds a fraction of
them)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import (
    InputTooLargeError,
    ServerRejectedError,
    ServerUnreachableError,
)
from faithrag.llm.fake import FakeLLM
from faithrag.methods.vanilla import VanillaRAG
from faithrag.pipeline import Pipeline
from faithrag.registry import PLAIN_RAG
from faithrag.retrieval import InMemoryRetriever
from faithrag.server import Limits
from faithrag.types import Answer, Passage

CANBERRA = "Canberra has been the capital of Australia since 1913."


def last_user_message(request) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


def test_health_names_the_model_and_the_default_method(start_server):
    config = Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake", "pipeline.method": "closed_book"})
    reply = start_server(config=config).get("/health")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json; charset=utf-8"
    assert reply.json() == {"status": "ok", "model": "fake", "method": "closed_book"}


def test_methods_lists_the_registered_stages_and_the_defaults(start_server):
    config = Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake", "retrieval.k": 3})
    body = start_server(config=config).get("/v1/methods").json()
    assert body["methods"] == registry.names("generator") and "csrag" in body["methods"]
    assert body["rerankers"] == registry.names("reranker") and "crossval" in body["rerankers"]
    assert body["verifiers"] == registry.names("verifier") == ["antisyco"]
    assert body["detectors"] == registry.names("detector")
    assert body["on_conflict"] == ["resolve", "surface", "flag", "by_kind", "abstain"]
    assert body["defaults"] == {"method": "vanilla", "rerank": None, "verify": None,
                                "detect": None, "on_conflict": "resolve", "k": 3}
    assert body["retrieval"] is False


def test_a_registered_detector_is_listed_and_can_be_chosen(start_server, conflict_stages,
                                                           recording_build):
    client = start_server(build=recording_build)
    assert "test_silent" in client.get("/v1/methods").json()["detectors"]
    reply = client.ask({"question": "Capital?", "passages": [{"text": CANBERRA}],
                        "detect": "test_silent", "on_conflict": "surface"})
    assert reply.status == 200
    chosen = recording_build.configs[-1].pipeline
    assert (chosen.detect, chosen.on_conflict) == ("test_silent", "surface")


def test_the_answer_carries_the_conflicts_the_stages_met_and_their_checks(start_server,
                                                                          conflict_stages):
    client = start_server(llm=FakeLLM(default="Canberra"))
    reply = client.ask({"question": "What is the capital of Australia?", "rerank": "test_sides",
                        "passages": [{"title": "Canberra", "text": CANBERRA},
                                     {"id": "rumour", "title": "Sydney",
                                      "text": "Sydney is the capital of Australia."}]})
    assert reply.status == 200
    result = reply.json()
    assert result["conflicts"] == [{
        "kind": "passage_vs_passage", "stage": "test_sides", "action": "removed",
        "confidence": 0.75, "note": "rumour contradicts p1",
        "sides": [{"answer": "Canberra", "quote": CANBERRA, "passages": ["p1"],
                   "source": "passage"},
                  {"answer": "Sydney", "quote": "Sydney is the capital of Australia.",
                   "passages": ["rumour"], "source": "passage"}]}]
    assert [(c["kind"], c["status"]) for c in result["conflict_checks"]] == [
        ("passage_vs_passage", "conflict"), ("ambiguous", "no_conflict"),
        ("context_vs_memory", "could_not_tell")]
    assert [r["id"] for r in result["removed"]] == ["rumour"]
    quiet = client.ask({"question": "Capital?", "passages": [{"text": CANBERRA}]}).json()
    assert (quiet["conflicts"], quiet["conflict_checks"]) == ([], [])


def test_given_passages_are_answered_from_and_traced(start_server):
    llm = FakeLLM([("since 1913", "Canberra")], default="no evidence seen")
    client = start_server(llm=llm)
    reply = client.ask({"question": "What is the capital of Australia?",
                        "passages": [{"title": "Australia", "text": CANBERRA},
                                     {"id": "extra", "text": "Sydney is a large harbour city."}]})
    assert reply.status == 200
    result = reply.json()
    assert result["answer"] == "Canberra" and result["parse_status"] == "ok"
    assert [(p["id"], p["title"], p["source"]) for p in result["passages"]] == [
        ("p1", "Australia", "request"), ("extra", "", "request")]
    assert result["removed"] == []
    steps = result["trace"]["steps"]
    assert [(s["stage"], s["name"]) for s in steps] == [("generate", "vanilla")]
    assert steps[0]["inputs"]["passages"] == ["p1", "extra"]
    assert steps[0]["llm_calls"][0]["prompt_tokens"] > 0
    assert result["trace"]["totals"]["llm_calls"] == 1
    assert CANBERRA in last_user_message(llm.calls[0])


def test_choices_pick_an_option_or_count_a_parse_failure(start_server):
    client = start_server(llm=FakeLLM([("Melbourne", "Melbourne")], default="Canberra"))
    picked = client.ask({"question": "Capital?", "choices": ["Sydney", "Canberra"],
                         "passages": [{"text": CANBERRA}]}).json()
    assert (picked["answer"], picked["choice_index"], picked["parse_status"]) == (
        "Canberra", 1, "ok")
    assert picked["choices"] == ["Sydney", "Canberra"]
    unreadable = client.ask({"question": "Capital? Melbourne?", "choices": ["Sydney", "Perth"],
                             "passages": [{"text": CANBERRA}]}).json()
    assert unreadable["parse_status"] == "failed" and unreadable["choice_index"] is None


def test_without_passages_the_server_retrieves_k_from_its_index(start_server):
    retriever = InMemoryRetriever([Passage("bridge", "The Aldermoor Bridge opened in 1887."),
                                   Passage("mill", "Walkers like the old mill by the river."),
                                   Passage("fair", "The Aldermoor fair is held in May.")])
    client = start_server(retriever=retriever)
    assert client.get("/v1/methods").json()["retrieval"] is True
    result = client.ask({"question": "When did the Aldermoor Bridge open?", "k": 1}).json()
    assert [s["stage"] for s in result["trace"]["steps"]] == ["retrieve", "generate"]
    assert result["trace"]["steps"][0]["inputs"]["k"] == 1
    assert [p["id"] for p in result["passages"]] == ["bridge"]


def test_method_rerank_and_verify_are_chosen_per_request(start_server):
    client = start_server(llm=FakeLLM(default="[2] > [1]"))
    result = client.ask({"question": "Capital?", "method": "closed_book", "rerank": "listwise",
                         "passages": [{"text": "Sydney."}, {"text": CANBERRA}]}).json()
    assert [(s["stage"], s["name"]) for s in result["trace"]["steps"]] == [
        ("rerank", "listwise"), ("generate", "closed_book")]
    assert result["trace"]["steps"][0]["outputs"]["order"] == ["p2", "p1"]
    assert result["passages"] == []  # closed_book reads none of them, and says so
    assert result["evidence"] == {"given": 2, "seen": 0, "dropped": 2, "cut": [],
                                  "reason": "the method answers without passages"}
    default = client.ask({"question": "Capital?", "passages": [{"text": CANBERRA}]}).json()
    assert [s["name"] for s in default["trace"]["steps"]] == ["vanilla"]


def test_null_switches_off_a_stage_the_server_runs_by_default(start_server):
    config = Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake", "pipeline.rerank": "listwise"})
    client = start_server(config=config, llm=FakeLLM(default="[1]"))
    passages = [{"text": CANBERRA}, {"text": "Sydney."}]
    with_default = client.ask({"question": "Capital?", "passages": passages}).json()
    switched_off = client.ask({"question": "Capital?", "passages": passages,
                               "rerank": None}).json()
    assert [s["stage"] for s in with_default["trace"]["steps"]] == ["rerank", "generate"]
    assert [s["stage"] for s in switched_off["trace"]["steps"]] == ["generate"]


@pytest.mark.parametrize("field, value, valid", [
    ("method", "nonsense", "closed_book, cot_json"),
    ("rerank", "shuffle", "bi_encoder, crossval"),
    ("verify", "trust_me", "antisyco, or null for none"),
    ("detect", "everything", "null"),
    ("on_conflict", "guess", "resolve, surface, flag, by_kind, abstain."),
])
def test_unknown_stage_names_are_refused_naming_the_valid_ones(start_server, field, value,
                                                                valid):
    llm = FakeLLM(default="x")
    reply = start_server(llm=llm).ask({"question": "q?", field: value})
    assert reply.status == 400
    assert reply.json()["error"] == f"Unknown {field} {value!r}."
    assert valid in reply.json()["hint"]
    assert llm.calls == []  # refused before any model work


def test_a_config_error_while_building_a_pipeline_is_a_400_with_its_hint(start_server):
    reply = start_server().ask({"question": "q?", "verify": "antisyco"})
    assert reply.status == 400
    assert reply.json()["error"] == "The antisyco verifier needs a trusted knowledge base."
    assert "--kb" in reply.json()["hint"]


@pytest.mark.parametrize("body, message", [
    (b"{not json", "not valid JSON"),
    (b"", "body is empty"),
    (b"\xff\xfe\x00{", "not valid UTF-8"),
    (b"[1, 2]", "must be a JSON object"),
    (b"{}", "'question' is required"),
    (b'{"question": "   "}', "'question'"),
    (b'{"question": 42}', "'question': Input should be a valid string"),
    (b'{"question": "q?", "qestion": "typo"}', "Unknown field 'qestion'"),
    (b'{"question": "q?", "choices": "Sydney"}', "'choices': Input should be a valid list"),
    (b'{"question": "q?", "choices": ["Sydney"]}', "at least 2 items"),
    (b'{"question": "q?", "choices": ["Sydney", 3]}', "'choices.1'"),
    (b'{"question": "q?", "choices": ["Sydney", " "]}', "'choices' must be non-empty strings"),
    (b'{"question": "q?", "passages": "text"}', "'passages': Input should be a valid list"),
    (b'{"question": "q?", "passages": ["text"]}', "'passages.0'"),
    (b'{"question": "q?", "passages": [{"text": "x", "body": "x"}]}',
     "Unknown field 'passages.0.body'"),
    (b'{"question": "q?", "passages": [{"text": ""}]}', "'passages.0.text'"),
    (b'{"question": "q?", "passages": [{"text": "a", "id": 7}]}', "'passages.0.id'"),
    (b'{"question": "q?", "passages": [{"text": "a", "id": "x"}, {"text": "b", "id": "x"}]}',
     "Passage ids must be unique"),
    (b'{"question": "q?", "k": "3"}', "'k': Input should be a valid integer"),
    (b'{"question": "q?", "k": 0}', "'k': Input should be greater than or equal to 1"),
    (b'{"question": "q?", "k": true}', "'k': Input should be a valid integer"),
    (b'{"question": "q?", "method": 5}', "'method': Input should be a valid string"),
])
def test_bad_bodies_are_a_400_with_a_clear_message(start_server, body, message):
    llm = FakeLLM(default="x")
    client = start_server(llm=llm)
    reply = client.request("POST", "/v1/ask", body, {"Content-Type": "application/json"})
    assert reply.status == 400
    assert message in reply.json()["error"] and reply.json()["hint"]
    assert llm.calls == []
    assert client.get("/health").status == 200


def test_the_default_body_limit_is_one_mebibyte(start_server):
    client = start_server()
    json_type = {"Content-Type": "application/json"}
    padding = b" " * (1 << 20)
    assert client.request("POST", "/v1/ask", b'{"question": "q?"}' + padding,
                          json_type).status == 413
    fits = b'{"question": "q?"}' + b" " * ((1 << 20) - 18)
    assert client.request("POST", "/v1/ask", fits, json_type).status == 200


@pytest.mark.parametrize("error, status", [
    (ServerUnreachableError("The server at http://127.0.0.1:9/v1 did not answer.",
                            "Start the server or fix --base-url."), 503),
    (ServerRejectedError("The server refused logit_bias.", "Use another backend."), 502),
    (InputTooLargeError("The question does not fit the context window.",
                        "Raise --n-ctx."), 422),
])
def test_a_faithrag_error_in_the_pipeline_is_its_message_and_hint(start_server, error, status):
    def fail(request):
        raise error
    client = start_server(llm=FakeLLM(fail))
    reply = client.ask({"question": "q?", "passages": [{"text": CANBERRA}]})
    assert reply.status == status
    assert reply.json() == {"error": error.message, "hint": error.hint}
    assert client.get("/health").status == 200


def test_an_unexpected_exception_is_a_500_logged_once_and_the_server_goes_on(start_server,
                                                                            caplog):
    answers = iter([RuntimeError("boom in the generator"), "Canberra"])

    def flaky(request):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer
    client = start_server(llm=FakeLLM(flaky))
    reply = client.ask({"question": "q?", "passages": [{"text": CANBERRA}]})
    assert reply.status == 500
    assert reply.json()["error"] == "RuntimeError: boom in the generator"
    logged = [r for r in caplog.records if r.exc_info]
    assert len(logged) == 1 and "boom in the generator" in str(logged[0].exc_info[1])
    assert client.ask({"question": "q?", "passages": [{"text": CANBERRA}]}).json()[
        "answer"] == "Canberra"


def test_non_finite_numbers_in_a_trace_are_sent_as_valid_json(start_server):
    class Scores:
        name = "scores"

        def generate(self, question, passages, trace):
            with trace.step("generate", self.name) as step:
                step.outputs = {"logprobs": [float("-inf"), -0.5], "margin": float("nan")}
            return Answer("Canberra")

    client = start_server(build=lambda config, llm, retriever: Pipeline(Scores()))
    reply = client.ask({"question": "q?"})

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")
    outputs = json.loads(reply.body, parse_constant=refuse)["trace"]["steps"][0]["outputs"]
    assert outputs == {"logprobs": ["-inf", -0.5], "margin": "nan"}


@pytest.mark.parametrize("method, path, status, allow", [
    ("GET", "/nowhere", 404, None),
    ("POST", "/v2/ask", 404, None),
    ("GET", "/v1/ask", 405, "POST"),
    ("DELETE", "/v1/ask", 405, "POST"),
    ("POST", "/health", 405, "GET"),
    ("PUT", "/", 405, "GET"),
])
def test_unknown_paths_and_wrong_verbs(start_server, method, path, status, allow):
    reply = start_server().request(method, path, b"{}" if method != "GET" else None,
                                   {"Content-Type": "application/json"})
    assert reply.status == status
    assert reply.headers.get("Allow") == allow
    assert reply.json()["error"]


def test_health_ignores_a_query_string(start_server):
    assert start_server().get("/health?verbose=1").json()["status"] == "ok"


def test_a_run_past_the_time_limit_is_a_504_and_queued_ones_give_up(start_server):
    from faithrag.server import Limits

    release = threading.Event()

    def slow(request):
        release.wait(10)
        return "Canberra"
    llm = FakeLLM(slow)
    client = start_server(llm=llm, limits=Limits(request_seconds=0.5))
    body = {"question": "q?", "passages": [{"text": CANBERRA}]}
    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(client.ask, [body, body]))
    assert [r.status for r in replies] == [504, 504]
    assert time.monotonic() - started < 5
    assert {r.json()["error"] for r in replies} <= {
        "The request did not finish within 0.5 s.",
        "The request waited for the model past its time limit."}
    assert "--request-timeout" in replies[0].json()["hint"]
    release.set()
    assert client.get("/health").status == 200
    assert len(llm.calls) == 1  # the queued run never reached the model


def echo_question_slowly(in_flight: list[int], peak: list[int], lock: threading.Lock):
    def respond(request):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return last_user_message(request).split("Question: ")[1].split("\n")[0]
    return respond


def test_concurrent_requests_queue_on_an_embedded_model_and_are_all_answered(start_server):
    in_flight, peak, lock = [0], [0], threading.Lock()
    client = start_server(llm=FakeLLM(echo_question_slowly(in_flight, peak, lock)),
                          serialize_runs=True)
    questions = [f"question number {i}?" for i in range(8)]
    with ThreadPoolExecutor(len(questions)) as pool:
        replies = list(pool.map(lambda q: client.ask({"question": q,
                                                      "passages": [{"text": CANBERRA}]}),
                                questions))
    assert [r.status for r in replies] == [200] * len(questions)
    assert [r.json()["answer"] for r in replies] == questions
    assert peak[0] == 1


def test_a_server_backed_model_takes_requests_concurrently(start_server):
    both_inside = threading.Barrier(2, timeout=10)  # passes only when two runs overlap

    def respond(request):
        both_inside.wait()
        return "Canberra"
    client = start_server(llm=FakeLLM(respond), serialize_runs=False)
    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(lambda q: client.ask({"question": q,
                                                      "passages": [{"text": CANBERRA}]}),
                                ["a?", "b?"]))
    assert [r.json()["answer"] for r in replies] == ["Canberra", "Canberra"]


def test_the_schema_describes_every_route_and_the_docs_load_without_a_network(start_server):
    client = start_server()
    schema = client.get("/openapi.json").json()
    assert set(schema["paths"]) == {"/", "/health", "/v1/methods", "/v1/ask",
                                    "/v1/models", "/v1/models/{model}", "/v1/chat/completions"}
    ask = schema["paths"]["/v1/ask"]["post"]
    assert ask["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/AskBody")
    schemas = schema["components"]["schemas"]
    result = schemas["AskResult"]["properties"]
    assert "evidence" in result
    assert result["conflicts"]["items"]["$ref"].endswith("/Conflict")
    assert result["conflict_checks"]["items"]["$ref"].endswith("/ConflictCheck")
    assert schemas["Conflict"]["properties"]["sides"]["items"]["$ref"].endswith("/ConflictSide")
    assert "ambiguous" in schemas["Conflict"]["properties"]["kind"]["enum"]
    assert schemas["ConflictCheck"]["properties"]["status"]["enum"] == [
        "conflict", "no_conflict", "could_not_tell"]
    assert set(schemas["ConflictSide"]["properties"]) == {"answer", "quote", "passages",
                                                          "source"}
    assert "detectors" in schemas["MethodsInfo"]["properties"]
    page = client.get("/docs").body.decode()
    assets = ["/docs/static/swagger-ui-bundle.js", "/docs/static/swagger-ui.css",
              "/docs/static/favicon.png"]
    for asset in assets:
        assert f"'{asset}'" in page or f'"{asset}"' in page, asset
        assert client.get(asset).status == 200
    assert "cdn" not in page.lower()


def prompt_of(llm: FakeLLM) -> str:
    (call,) = llm.calls
    return next(m.content for m in reversed(call.messages) if m.role == "user")


def test_a_thousand_posted_only_those_that_fit_are_listed_and_the_rest_counted(start_server):
    llm = FakeLLM(default="0417", context_window=4096)
    client = start_server(llm=llm, limits=Limits(max_passages=1000))
    posted = [{"id": f"r{i}", "text": f"Record {i}: the gate code of block {i} is {i:04d}."}
              for i in range(1000)]
    result = client.ask({"question": "What is the gate code of block 417?",
                         "passages": posted}).json()
    prompt = prompt_of(llm)
    seen, evidence = result["passages"], result["evidence"]
    assert 20 < len(seen) < 200
    assert [p["id"] for p in seen] == [p["id"] for p in posted[:len(seen)]]
    assert evidence == {"given": 1000, "seen": len(seen), "dropped": 1000 - len(seen),
                        "cut": [seen[-1]["id"]], "reason": evidence["reason"]}
    assert evidence["reason"].startswith("the model's context window (4096 tokens")
    for passage in seen:
        assert f"\n{passage['text'].strip()}\n</passage>" in prompt
    last_posted = posted[len(seen) - 1]["text"]
    assert last_posted.startswith(seen[-1]["text"]) and seen[-1]["text"] != last_posted
    assert posted[len(seen)]["text"] not in prompt  # the first dropped one is not in the prompt


def test_when_everything_fits_nothing_is_dropped(start_server):
    client = start_server(llm=FakeLLM(default="Canberra"))
    result = client.ask({"question": "q?", "passages": [{"text": "a"}, {"text": "b"}]}).json()
    assert [p["text"] for p in result["passages"]] == ["a", "b"]
    assert result["evidence"] == {"given": 2, "seen": 2, "dropped": 0, "cut": [], "reason": ""}


def test_the_ask_response_is_the_results_data(start_server):
    from faithrag.server.app import AskResult

    client = start_server(llm=FakeLLM(default="Canberra"))
    body = client.ask({"question": "q?", "passages": [{"text": CANBERRA}]}).json()
    result = Pipeline(VanillaRAG(FakeLLM(default="Canberra"))).run(
        "q?", passages=[Passage("p1", CANBERRA, source="request")])
    data = result.to_dict()
    assert set(AskResult.model_fields) == set(data) == set(body)
    assert body["passages"] == data["passages"] and body["evidence"] == data["evidence"]

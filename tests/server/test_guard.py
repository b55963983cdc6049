"""The guard in front of every route, probed over real sockets as a hostile but fair client
would: foreign Host names, other origins, missing tokens, non-JSON bodies, oversized, slow,
chunked and deeply nested bodies, HEAD and OPTIONS. Each gets its status at once, and the model
is never called."""

from __future__ import annotations

import json
import socket
import time

import pytest

from faithrag.llm.fake import FakeLLM
from faithrag.server import Limits
from faithrag.server.guard import json_depth_exceeds, split_host

JSON = {"Content-Type": "application/json"}
ASK = json.dumps({"question": "q?", "passages": [{"text": "Canberra."}]}).encode()


def raw(client, request: bytes, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Send `request` as it is; the status, headers and body of the reply."""
    with socket.create_connection((client.server.host, client.server.port),
                                  timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    return int(lines[0].split()[1]), headers, body


def test_split_host_and_json_depth():
    assert split_host("LocalHost:8000") == "localhost"
    assert split_host("[::1]:8000") == "::1" and split_host("::1") == "::1"
    assert not json_depth_exceeds(b'{"a": [[1]], "b": "[[[[[[[["}', 3)
    assert json_depth_exceeds(b'{"a": [[1]]}', 2)
    assert not json_depth_exceeds(b'{"a": "\\"[[[[", "b": [1]}', 2)


def test_every_response_forbids_content_sniffing(start_server):
    client = start_server()
    for reply in (client.get("/"), client.get("/health"), client.get("/nowhere"),
                  client.request("POST", "/v1/ask", ASK)):
        assert reply.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.2.nip.io", ""])
def test_a_foreign_host_name_is_refused(start_server, host):
    llm = FakeLLM(default="x")
    client = start_server(llm=llm)
    status, _, body = raw(client, f"GET /health HTTP/1.1\r\nHost: {host}\r\n"
                                  "Connection: close\r\n\r\n".encode())
    assert status == 400 and "does not answer to the host name" in json.loads(body)["error"]
    assert "--allowed-host" in json.loads(body)["hint"]


def test_loopback_names_and_allowed_hosts_are_answered(start_server):
    client = start_server(allowed_hosts=("rag.internal",))
    for host in ("127.0.0.1", "localhost:1234", "[::1]:80", "rag.internal:8000"):
        status, _, _ = raw(client, f"GET /health HTTP/1.1\r\nHost: {host}\r\n"
                                   "Connection: close\r\n\r\n".encode())
        assert status == 200, host


def test_cross_origin_requests_are_refused_and_same_origin_ones_served(start_server):
    llm = FakeLLM(default="Canberra")
    client = start_server(llm=llm)
    other = client.ask({"question": "q?"}, {"Origin": "http://localhost:9999"})
    assert other.status == 403 and "origin 'http://localhost:9999'" in other.json()["error"]
    assert "--allowed-origin http://localhost:9999" in other.json()["hint"]
    sneaky = client.request("POST", "/v1/ask", ASK, {**JSON, "Sec-Fetch-Site": "cross-site"})
    assert sneaky.status == 403 and llm.calls == []
    same = client.ask({"question": "q?"}, {"Origin": client.url})
    assert same.status == 200


def test_a_configured_origin_is_allowed_with_cors_headers(start_server):
    origin = "http://localhost:3000"
    client = start_server(allowed_origins=(origin,))
    preflight = client.request("OPTIONS", "/v1/ask", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert preflight.status == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == origin
    reply = client.ask({"question": "q?"}, {"Origin": origin})
    assert reply.status == 200 and reply.headers["Access-Control-Allow-Origin"] == origin
    assert client.ask({"question": "q?"}, {"Origin": "http://localhost:3001"}).status == 403


def test_a_text_plain_post_from_a_form_or_no_cors_fetch_is_refused(start_server):
    llm = FakeLLM(default="x")
    client = start_server(llm=llm)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        reply = client.request("POST", "/v1/ask", ASK,
                               {"Content-Type": content_type} if content_type else {})
        assert reply.status == 415 and "application/json" in reply.json()["hint"]
    assert llm.calls == []
    assert client.request("POST", "/v1/ask", ASK,
                          {"Content-Type": "application/json; charset=utf-8"}).status == 200


def test_with_an_api_key_every_route_but_the_static_pages_needs_it(start_server):
    llm = FakeLLM(default="Canberra")
    client = start_server(llm=llm, api_key="s3cret")
    for path in ("/health", "/v1/methods", "/v1/models"):
        reply = client.get(path)
        assert reply.status == 401 and reply.headers["WWW-Authenticate"] == "Bearer"
        assert "--api-key" in json.dumps(reply.json())
        assert client.get(path, {"Authorization": "Bearer wrong"}).status == 401
        assert client.get(path, {"Authorization": "Bearer s3cret"}).status == 200
    assert client.ask({"question": "q?"}).status == 401 and llm.calls == []
    assert client.ask({"question": "q?"}, {"Authorization": "Bearer s3cret"}).status == 200
    for page in ("/", "/docs", "/openapi.json"):
        assert client.get(page).status == 200, page


def test_a_declared_length_over_the_limit_is_a_413_at_once(start_server):
    client = start_server(limits=Limits(max_body_bytes=1024))
    started = time.monotonic()
    status, _, body = raw(client, b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  b"Content-Type: application/json\r\nContent-Length: 999999\r\n"
                                  b"\r\n{\"question\": ")
    assert status == 413 and "999999 bytes, over the limit of 1024" in json.loads(body)["error"]
    assert time.monotonic() - started < 2


def test_a_body_over_the_limit_still_being_sent_reads_its_413(start_server):
    client = start_server(limits=Limits(max_body_bytes=1024))
    body = json.dumps({"question": "q?", "passages": [{"text": "x" * 200_000}]}).encode()
    reply = client.request("POST", "/v1/ask", body, JSON)
    assert reply.status == 413 and "--max-body-bytes" in reply.json()["hint"]
    assert client.ask({"question": "q?", "passages": [{"text": "short"}]}).status == 200


def test_a_large_body_refused_for_its_type_or_token_still_reads_its_refusal(start_server):
    client = start_server(api_key="s3cret")
    body = json.dumps({"question": "q?", "passages": [{"text": "x" * 8_000_000}]}).encode()
    assert client.request("POST", "/v1/ask", body, {"Content-Type": "text/plain"}).status == 401
    assert client.request("POST", "/v1/ask", body, {
        "Content-Type": "text/plain", "Authorization": "Bearer s3cret"}).status == 415


def test_a_chunked_body_over_the_limit_is_a_413_and_one_within_it_is_served(start_server):
    client = start_server(limits=Limits(max_body_bytes=1024))
    chunk = b"x" * 600
    status, _, _ = raw(client, b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                               b"\r\n" + (b"258\r\n" + chunk + b"\r\n") * 2)
    assert status == 413
    status, _, body = raw(client, b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  b"Content-Type: application/json\r\nConnection: close\r\n"
                                  b"Transfer-Encoding: chunked\r\n\r\n"
                                  + f"{len(ASK):x}\r\n".encode() + ASK + b"\r\n0\r\n\r\n")
    assert status == 200 and json.loads(body)["answer"] == "Canberra"


def test_a_body_that_does_not_arrive_in_time_is_a_408(start_server):
    client = start_server(limits=Limits(body_seconds=0.5))
    status, _, body = raw(client, b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  b"Content-Type: application/json\r\nContent-Length: 100\r\n"
                                  b"\r\n{\"question\": ")
    assert status == 408 and "did not arrive in time" in json.loads(body)["error"]


def test_the_body_deadline_is_for_the_whole_body_not_each_chunk(start_server, drip):
    client = start_server(limits=Limits(body_seconds=1.0))
    with socket.create_connection((client.server.host, client.server.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n")
        started = time.monotonic()
        # one byte every 0.2 s: 11 s at most
        reply = drip(sock, [bytes([b]) for b in b'{"question": "' * 4], 0.2)
        elapsed = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408") and 0.9 <= elapsed < 2.0
    assert b"connection: close" in reply.lower()


def test_bad_content_length_is_a_400(start_server):
    status, _, _ = raw(start_server(), b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                       b"Content-Type: application/json\r\n"
                                       b"Content-Length: lots\r\n\r\n")
    assert status == 400


@pytest.mark.parametrize("body, error, hint", [
    (b'{"question": "caf\xe9?"}', "not valid UTF-8 (byte 17)", "UTF-8"),
    (b'{"question": "q?", "k": ' + b"7" * 5000 + b"}", "integer string conversion",
     "numbers of ordinary size"),
    (b'{"question": "q?", "k": 1e99999}', "", "/openapi.json"),
])
def test_an_unreadable_body_is_a_400_with_a_hint(start_server, body, error, hint):
    llm = FakeLLM(default="x")
    client = start_server(llm=llm)
    for path in ("/v1/ask", "/v1/chat/completions"):
        reply = client.request("POST", path, body, JSON)
        answer = reply.json()
        error_text, hint_text = ((answer["error"]["message"], answer["error"]["hint"])
                                 if isinstance(answer["error"], dict)  # OpenAI's shape
                                 else (answer["error"], answer["hint"]))
        assert reply.status == 400 and error in error_text and hint in hint_text
    assert llm.calls == []


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"question": "q?", "passages": '
                                  + b"[" * 40 + b"]" * 40 + b"}"])
def test_deeply_nested_json_is_a_400_not_a_crash(start_server, body):
    llm = FakeLLM(default="x")
    client = start_server(llm=llm)
    reply = client.request("POST", "/v1/ask", body, JSON)
    assert reply.status == 400 and "nested deeper than 32 levels" in reply.json()["error"]
    assert llm.calls == [] and client.get("/health").status == 200


def test_head_is_answered_like_get_without_a_body(start_server):
    client = start_server()
    for path in ("/health", "/"):
        reply = client.request("HEAD", path)
        get = client.get(path)
        assert reply.status == 200 and reply.body == b""
        assert reply.headers["Content-Type"] == get.headers["Content-Type"]
        assert reply.headers["Content-Length"] == str(len(get.body))


def test_the_openai_paths_answer_errors_in_openais_shape(start_server):
    client = start_server(api_key="s3cret")
    body = client.get("/v1/models").json()
    assert body["error"]["type"] == "authentication_error" and body["error"]["code"] == 401
    assert body["error"]["message"].startswith("A valid API key is required.")
    assert "--api-key" in body["error"]["hint"]


def test_options_says_what_each_path_allows(start_server):
    client = start_server()
    reply = client.request("OPTIONS", "/v1/ask")
    assert reply.status == 204 and reply.headers["Allow"] == "OPTIONS, POST"
    assert client.request("OPTIONS", "/health").headers["Allow"] == "GET, HEAD, OPTIONS"
    missing = client.request("OPTIONS", "/nowhere")
    assert missing.status == 404 and missing.json()["error"] == "No such path: /nowhere"

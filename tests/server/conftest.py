"""A faithrag server on a free port in a background thread, around the fake LLM, and a small
urllib client for it."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from faithrag.config import Config
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline
from faithrag.server import AskService, FaithragServer
from faithrag.server.app import DEFAULT_MAX_BODY_BYTES


@dataclass
class Reply:
    status: int
    headers: Any
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    def __init__(self, url: str, server: FaithragServer):
        self.url = url.rstrip("/")
        self.server = server

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        request = urllib.request.Request(self.url + path, data=body, method=method,
                                         headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return Reply(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:
            with error:
                return Reply(error.code, error.headers, error.read())

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def ask(self, payload: Any) -> Reply:
        return self.request("POST", "/v1/ask", json.dumps(payload).encode(),
                            {"Content-Type": "application/json"})


@pytest.fixture
def start_server():
    """`start(llm=..., ...)` serves and returns a Client; every server is stopped afterwards."""
    servers: list[FaithragServer] = []

    def start(llm: Any = None, config: Config | None = None, retriever: Any = None,
              serialize_runs: bool = True, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
              build: Any = Pipeline.from_parts) -> Client:
        config = config or Config.load(overrides={"llm.backend": "fake"})
        service = AskService(config, llm or FakeLLM(default="Canberra"), retriever, build,
                             serialize_runs)
        server = FaithragServer("127.0.0.1", 0, service, max_body_bytes)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return Client(server.url, server)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()

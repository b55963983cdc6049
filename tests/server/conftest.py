"""A faithrag server (uvicorn) on a free port in a background thread, around the fake LLM, and a
small urllib client for it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from faithrag.config import Config
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline
from faithrag.server import AskService, FaithragServer, Limits, ServerSettings, create_app


@dataclass
class Reply:
    status: int
    headers: Any
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    def __init__(self, server: FaithragServer, service: AskService):
        self.url = server.url.rstrip("/")
        self.server = server
        self.service = service

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

    def get(self, path: str, headers: dict[str, str] | None = None) -> Reply:
        return self.request("GET", path, headers=headers)

    def ask(self, payload: Any, headers: dict[str, str] | None = None) -> Reply:
        return self.request("POST", "/v1/ask", json.dumps(payload).encode(),
                            {"Content-Type": "application/json", **(headers or {})})


@pytest.fixture
def start_server():
    """`start(llm=..., ...)` serves and returns a Client; every server is stopped afterwards."""
    servers: list[FaithragServer] = []

    def start(llm: Any = None, config: Config | None = None, retriever: Any = None,
              serialize_runs: bool = True, limits: Limits | None = None,
              build: Any = Pipeline.from_parts, **settings: Any) -> Client:
        config = config or Config.load(overrides={"llm.backend": "fake"})
        service = AskService(config, llm or FakeLLM(default="Canberra"), retriever, build,
                             serialize_runs, limits)
        server = FaithragServer(create_app(service, ServerSettings(limits=service.limits,
                                                                   **settings)),
                                "127.0.0.1", 0, access_log=False)
        server.start()
        servers.append(server)
        return Client(server, service)

    yield start
    for server in servers:
        server.stop()

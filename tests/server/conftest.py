"""A faithrag server (uvicorn) on a free port in a background thread, around the fake LLM, a
small urllib client for it, and throwaway registered stages that report a conflict."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.llm.fake import FakeLLM
from faithrag.methods.base import RemovedPassage, RerankResult
from faithrag.pipeline import Pipeline
from faithrag.registry import PLAIN_RAG
from faithrag.server import AskService, FaithragServer, Limits, ServerSettings, create_app
from faithrag.types import Conflict, ConflictCheck, ConflictSide

SIDES_RERANKER = "test_sides"  # the names the fixture conflict_stages registers
SILENT_DETECTOR = "test_silent"


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
        config = config or Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake"})
        service = AskService(config, llm or FakeLLM(default="Canberra"), retriever, build,
                             serialize_runs, limits)
        server = FaithragServer(create_app(service, ServerSettings(limits=service.limits,
                                                                   **settings)),
                                "127.0.0.1", 0, access_log=False, limits=service.limits)
        server.start()
        servers.append(server)
        return Client(server, service)

    yield start
    for server in servers:
        server.stop()


class FirstAgainstLast:
    """A re-ranker that reports the first and the last passage as a passage-vs-passage conflict,
    each side's answer being its passage's title, removes the last one, and records that it
    could not tell whether the model's memory disagrees."""

    name = SIDES_RERANKER

    def rerank(self, question, passages, trace):
        with trace.step("rerank", self.name) as step:
            first, last = passages[0], passages[-1]
            step.conflicts.append(Conflict(
                "passage_vs_passage", self.name,
                [ConflictSide(p.title, p.text, [p.id], "passage") for p in (first, last)],
                "removed", 0.75, f"{last.id} contradicts {first.id}"))
            step.checks += [ConflictCheck("passage_vs_passage", self.name, "conflict"),
                            ConflictCheck("ambiguous", self.name, "no_conflict"),
                            ConflictCheck("context_vs_memory", self.name, "could_not_tell")]
            step.decision = f"removed {last.id}"
            return RerankResult(passages[:-1], [RemovedPassage(last, f"contradicts {first.id}")])


@pytest.fixture
def drip():
    """Sends `pieces` one at a time, `every` seconds apart, over a raw socket until the server
    answers or closes it; returns what it answered (bounded by the count of pieces)."""
    def send(sock, pieces, every: float) -> bytes:
        reply = b""
        for piece in pieces:
            try:
                sock.sendall(piece)
            except OSError:  # closed by the server
                break
            time.sleep(every)
            sock.settimeout(0.01)
            try:
                reply += sock.recv(65536)
            except TimeoutError:
                continue
            if reply:
                break
        return reply
    return send


@pytest.fixture
def conflict_stages():
    """Registers the re-ranker `test_sides` (FirstAgainstLast) and a detector `test_silent`
    (never built by these tests: it is there to be listed and chosen) for one test; start
    servers after it."""
    registry.register("reranker", SIDES_RERANKER, reports_conflicts=("passage_vs_passage",))(
        lambda llm, config, retriever: FirstAgainstLast())
    registry.register("detector", SILENT_DETECTOR, reports_conflicts=("passage_vs_passage",))(
        lambda llm, config, retriever: SilentDetector())
    yield
    registry.unregister("reranker", SIDES_RERANKER)
    registry.unregister("detector", SILENT_DETECTOR)


class SilentDetector:
    """A detector that looks and finds nothing."""

    name = SILENT_DETECTOR

    def detect(self, question, passages, answer, trace):
        return []


class RecordingBuild:
    """A pipeline builder that records the configuration of each pipeline it builds."""

    def __init__(self):
        self.configs: list[Config] = []

    def __call__(self, config: Config, llm, retriever) -> Pipeline:
        self.configs.append(config)
        return Pipeline.from_parts(config, llm, retriever)


@pytest.fixture
def recording_build() -> RecordingBuild:
    return RecordingBuild()

"""Pipelines are built once per (method, rerank, verify, detect, on_conflict, k) and shared by
the requests that choose them; a bad default fails when the service starts."""

from __future__ import annotations

import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline
from faithrag.registry import PLAIN_RAG
from faithrag.server import AskService
from faithrag.server.ask_request import AskBody, PipelineChoice
from faithrag.server.errors import RequestError


def body(fields: dict) -> AskBody:
    return AskBody.model_validate(fields)


def counting_builder(built: list[tuple[str, str | None, int]], llms: list | None = None):
    def build(config, llm, retriever):
        built.append((config.pipeline.method, config.pipeline.rerank, config.retrieval.k))
        if llms is not None:
            llms.append(llm)
        return Pipeline.from_parts(config, llm, retriever)
    return build


def service(built, llms: list | None = None, **overrides) -> AskService:
    config = Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake", **overrides})
    return AskService(config, FakeLLM(default="Canberra"), None, counting_builder(built, llms))


def test_the_default_pipeline_is_built_at_start_and_reused():
    built: list = []
    svc = service(built)
    assert built == [("vanilla", None, 5)]
    for _ in range(3):
        assert svc.ask(body({"question": "q?", "passages": [{"text": "t"}]}))["answer"] == "Canberra"
    assert built == [("vanilla", None, 5)]


def test_each_new_choice_builds_one_more_pipeline_on_the_shared_model():
    built: list = []
    llms: list = []
    svc = service(built, llms)
    for _ in range(2):
        svc.ask(body({"question": "q?", "method": "closed_book"}))
        svc.ask(body({"question": "q?", "k": 2}))
        svc.ask(body({"question": "q?", "rerank": "listwise", "passages": [{"text": "t"}]}))
    assert built == [("vanilla", None, 5), ("closed_book", None, 5), ("vanilla", None, 2),
                     ("vanilla", "listwise", 5)]
    assert all(llm is svc.llm for llm in llms) and len(llms) == 4
    assert svc.pipeline(PipelineChoice.of({"generator": "vanilla", "reranker": "listwise"},
                                          5)).reranker is not None


def test_the_detector_and_the_conflict_policy_are_part_of_the_choice(conflict_stages,
                                                                     recording_build):
    config = Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake", "pipeline.on_conflict": "abstain",
                                    "pipeline.detect": "test_silent"})
    svc = AskService(config, FakeLLM(default="Canberra"), None, recording_build)
    asked = [{}, {"on_conflict": "surface"}, {"detect": "test_silent"}, {"on_conflict": "abstain"},
             {"detect": None, "on_conflict": "resolve"}]
    for fields in asked:
        svc.ask(body({"question": "q?", "passages": [{"text": "t"}], **fields}))
    built = [(c.pipeline.detect, c.pipeline.on_conflict) for c in recording_build.configs]
    assert built == [("test_silent", "abstain"), ("test_silent", "surface"), (None, "resolve")]
    detectors = svc.methods()["detectors"]
    assert detectors == registry.names("detector") and "test_silent" in detectors
    assert svc.methods()["on_conflict"] == ["resolve", "surface", "flag", "by_kind", "abstain"]
    assert svc.methods()["defaults"]["on_conflict"] == "abstain"


def test_a_bad_default_fails_when_the_service_starts():
    with pytest.raises(ConfigError, match="Unknown method 'nonsense'"):
        service([], **{"pipeline.method": "nonsense"})
    with pytest.raises(ConfigError, match="trusted knowledge base"):
        service([], **{"pipeline.verify": "antisyco"})


def test_a_failed_build_is_not_cached():
    built: list = []
    svc = service(built)
    for _ in range(2):
        with pytest.raises(ConfigError):
            svc.ask(body({"question": "q?", "verify": "antisyco"}))
    assert built == [("vanilla", None, 5)] + [("vanilla", None, 5)] * 2


def test_a_bad_body_is_refused_before_any_pipeline_is_built():
    built: list = []
    svc = service(built)
    with pytest.raises(RequestError) as refused:
        svc.ask(body({"question": "q?", "method": "nope", "k": 3}))
    assert refused.value.status == 400 and built == [("vanilla", None, 5)]


def test_a_queued_run_gives_up_at_its_deadline_without_touching_the_model():
    import threading
    import time

    entered, release = threading.Event(), threading.Event()

    def slow(request):
        entered.set()
        release.wait(10)
        return "Canberra"
    llm = FakeLLM(slow)
    svc = AskService(Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake"}), llm, None, Pipeline.from_parts)
    first = threading.Thread(target=svc.ask, args=(body({"question": "first?",
                                                         "passages": [{"text": "t"}]}),))
    first.start()
    assert entered.wait(10)
    started = time.monotonic()
    with pytest.raises(RequestError) as refused:
        svc.ask(body({"question": "second?", "passages": [{"text": "t"}]}),
                deadline=time.monotonic() + 0.2)
    assert refused.value.status == 504 and 0.15 < time.monotonic() - started < 5
    release.set()
    first.join(10)
    assert len(llm.calls) == 1  # the second run never reached the model

import pytest

from faithrag.errors import ConfigError
from faithrag.llm.fake import FakeLLM
from faithrag.methods.base import RemovedPassage, RerankResult
from faithrag.methods.vanilla import VanillaRAG
from faithrag.pipeline import Pipeline
from faithrag.types import Answer, Passage


class ListRetriever:
    def __init__(self, passages):
        self.passages = passages

    def retrieve(self, query, k):
        return self.passages[:k]


class DropLast:
    name = "drop_last"

    def rerank(self, question, passages, trace):
        with trace.step("rerank", self.name):
            return RerankResult(passages[:-1], [RemovedPassage(passages[-1], "last")])


class Shout:
    name = "shout"

    def verify(self, question, passages, answer, trace):
        with trace.step("verify", self.name) as step:
            step.decision = "PASS"
            return Answer(answer.text.upper())


def test_stages_run_in_order_and_are_traced():
    passages = [Passage(f"p{i}", f"text {i}") for i in range(4)]
    llm = FakeLLM(default="yes")
    result = Pipeline(VanillaRAG(llm), ListRetriever(passages), DropLast(), Shout(), k=3).run("q?")
    assert [s.stage for s in result.trace.steps] == ["retrieve", "rerank", "generate", "verify"]
    assert [p.id for p in result.passages] == ["p0", "p1"]
    assert result.removed[0].passage.id == "p2" and result.removed[0].reason == "last"
    assert result.answer.text == "YES"
    assert result.to_dict()["removed"][0]["reason"] == "last"


def test_given_passages_skip_retrieval():
    result = Pipeline(VanillaRAG(FakeLLM(default="a")), ListRetriever([])).run(
        "q?", passages=[Passage("given", "t")])
    assert [s.stage for s in result.trace.steps] == ["generate"]


def test_bad_k():
    with pytest.raises(ConfigError):
        Pipeline(VanillaRAG(FakeLLM()), k=0)

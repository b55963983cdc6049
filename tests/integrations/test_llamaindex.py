"""The LlamaIndex adapter against the real llama-index-core: control flow on the scripted
FakeLLM, and the tiny model inside a LlamaIndex query engine (marker `model`)."""

from __future__ import annotations

import ast
import asyncio
import importlib
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core", reason="pip install 'faithrag[llamaindex]'")

import llama_index.core.llms
from llama_index.core import MockEmbedding, Settings, SimpleKeywordTableIndex, SummaryIndex
from llama_index.core.base.response.schema import (
    PydanticResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import (
    CompletionResponse,
    CustomLLM,
    LLMMetadata,
    MockLLM,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.postprocessor import LLMRerank, SimilarityPostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

import faithrag.llm
from faithrag import Config, LLMConfig, load_llm
from faithrag.errors import ConfigError, InputError, MissingExtraError
from faithrag.integrations.llamaindex import (
    FaithragCrossValRerank,
    FaithragVerifier,
)
from faithrag.llm.fake import FakeLLM

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
MARKER = "<!-- example: tests/integrations/test_llamaindex.py runs this block as written -->"
PASSAGE = re.compile(r'<passage id="(\w+)"[^>]*>\n(.*?)\n</passage>', re.DOTALL)
YEAR = re.compile(r"1\d{3}")
QUESTION = "When did the Aldermoor Bridge open?"


def year(text: str) -> str:
    found = YEAR.search(text)
    return found.group(0) if found else ""


def crossval_reply(request) -> str | None:
    """Detection names the first two shown passages that give different years; the verdict
    calls false the side fewer other passages agree with; ranking keeps the shown order."""
    shown = PASSAGE.findall(request.messages[-1].content)
    if request.purpose == "detect_conflict":
        dated = [(i, year(t)) for i, t in shown if year(t)]
        pair = next(((a, b) for a, ya in dated for b, yb in dated if ya != yb), None)
        return f"Conflict: [{pair[0]}] [{pair[1]}]" if pair else "Conflict: None"
    if request.purpose == "cross_validate":
        years = {i: year(t) for i, t in shown}
        support = {side: sum(years[side] == y for i, y in years.items() if i not in "AB")
                   for side in "AB"}
        false = min("AB", key=support.get)
        return f"Reason: {false} disagrees with the others.\nFalse passage: {false}"
    if request.purpose == "rank":
        return " > ".join(f"[{i}]" for i, _ in shown)
    return None


VERIFY_REPLIES = {"relevance": "RELEVANCE: RELEVANT", "support": "SUPPORT: PARTIAL",
                  "claims": "- The Aldermoor Bridge opened then.", "contradiction": "ANSWER: 1887",
                  "repair": "1887", "fallback": "1887"}


def scripted() -> FakeLLM:
    """Both stages' replies: crossval by content, the verifier's by purpose (the trusted
    knowledge base says 1887)."""
    return FakeLLM(lambda request: crossval_reply(request) or VERIFY_REPLIES[request.purpose])


class ScriptedLLM(CustomLLM):
    """A LlamaIndex LLM whose reply is `respond(prompt)`; LlamaIndex renders a chat into one
    prompt for it, as for any completion LLM."""

    respond: Any
    prompts: list = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted", context_window=4096)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.respond(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        text = self.complete(prompt).text
        yield CompletionResponse(text=text, delta=text)


def bridge_nodes() -> list[TextNode]:
    return [TextNode(id_="history", text="The Aldermoor Bridge opened in 1887.",
                     metadata={"title": "Aldermoor history", "year": 1887}),
            TextNode(id_="blog", text="The Aldermoor Bridge opened in 1921, says a blog."),
            TextNode(id_="survey", text="The Aldermoor Bridge has carried traffic since 1887."),
            TextNode(id_="walk", text="Walkers cross the Aldermoor Bridge, opened 1887.")]


def scored(nodes) -> list[NodeWithScore]:
    return [NodeWithScore(node=n, score=1.0 - i / 10) for i, n in enumerate(nodes)]


@pytest.fixture(autouse=True)
def no_openai(monkeypatch):
    """LlamaIndex's own LLM and embedding are its offline mocks, never a default OpenAI."""
    monkeypatch.setattr(Settings, "_llm", MockLLM(max_tokens=3))
    monkeypatch.setattr(Settings, "_embed_model", MockEmbedding(embed_dim=8))


@pytest.fixture
def trusted(tmp_path) -> Path:
    kb = tmp_path / "trusted"
    kb.mkdir()
    (kb / "bridges.txt").write_text("The Aldermoor Bridge opened to traffic in 1887.")
    return kb


# ----------------------------------------------------------------- the post-processor

def test_postprocessor_drops_the_false_side_and_records_why_on_the_kept_nodes():
    nodes = scored(bridge_nodes())
    kept = FaithragCrossValRerank(llm=scripted()).postprocess_nodes(
        nodes, query_str=QUESTION)
    assert [n.node.node_id for n in kept] == ["history", "survey", "walk"]
    assert [n.node.metadata["faithrag_rank"] for n in kept] == [1, 2, 3]
    assert [n.score for n in kept] == [1.0, 2 / 3, 1 / 3]  # rank scores, as a re-ranker's
    assert "retrieval_score" not in kept[0].node.metadata
    for node in kept:
        (removed,) = node.node.metadata["faithrag_removed"]
        assert removed["node_id"] == "blog"
        assert removed["reason"].startswith("conflicts with history")
        (conflict,) = node.node.metadata["faithrag_conflicts"]
        assert (conflict["kind"], conflict["action"]) == ("passage_vs_passage", "removed")
    first = kept[0].node
    assert first.metadata["title"] == "Aldermoor history" and first.metadata["year"] == 1887
    assert first.get_content() == "The Aldermoor Bridge opened in 1887."
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):  # never shown to a model
        assert "faithrag" not in first.get_content(metadata_mode=mode)
        assert "Aldermoor history" in first.get_content(metadata_mode=mode)
    assert "faithrag_rank" not in nodes[0].node.metadata  # the retrieved nodes are untouched


def test_top_n_cuts_as_llamaindex_rerankers_and_the_retrieval_score_can_be_kept():
    nodes = scored([TextNode(id_=f"n{i}", text=f"Note {i} on the Aldermoor Bridge.")
                    for i in range(7)])
    reranker = FaithragCrossValRerank(llm=scripted())
    assert reranker.top_n == 5  # as RankGPTRerank, the listwise re-ranker of llama-index-core
    assert len(reranker.postprocess_nodes(nodes, query_str=QUESTION)) == 5
    kept = FaithragCrossValRerank(llm=scripted(), top_n=2, keep_retrieval_score=True
                                  ).postprocess_nodes(nodes, query_str=QUESTION)
    assert [(n.score, n.node.metadata["retrieval_score"]) for n in kept] == [
        (1.0, 1.0), (6 / 7, 0.9)]
    assert "retrieval_score" not in kept[0].node.get_content(metadata_mode=MetadataMode.LLM)


def test_both_components_run_on_the_apps_llamaindex_llm(bridge_script, trusted):
    llm = ScriptedLLM(respond=bridge_script)
    kept = FaithragCrossValRerank(llm=llm).postprocess_nodes(scored(bridge_nodes()),
                                                             query_str=QUESTION)
    assert [n.node.node_id for n in kept] == ["walk", "survey", "history"]  # reversed
    verified = FaithragVerifier(llm=llm, kb=trusted).verify(
        QUESTION, "The bridge opened in 1921.", nodes=kept)
    assert (verified.response, verified.metadata["faithrag"]["decision"]) == ("1887", "REPAIR")
    assert any("False passage:" in prompt for prompt in llm.prompts)


def test_an_llm_with_a_setting_that_scores_options_is_refused_when_built():
    llm = ScriptedLLM(respond=lambda prompt: "")
    with pytest.raises(ConfigError, match="same_subject_check") as error:
        FaithragCrossValRerank(llm=llm, rerank__same_subject_check=True)
    assert "faithrag.load_llm" in error.value.hint and not llm.prompts


def choice_select(prompt: str) -> str:
    """LLMRerank's choice-select reply: every document shown, relevance 9, 8, 7, ..."""
    shown = re.findall(r"Document (\d+):", prompt.split("Let's try this now")[-1])
    return "\n".join(f"Doc: {n}, Relevance: {9 - i}" for i, n in enumerate(shown))


@pytest.mark.parametrize("reranker", ["LLMRerank", "FaithragCrossValRerank"])
def test_an_app_written_for_llamaindexs_reranker_keeps_working_with_faithrags(reranker,
                                                                              bridge_script):
    """The app: a query engine with an LLM re-ranker (`llm`, `top_n`), then a score cutoff;
    only the re-ranker's class is swapped."""
    rerank_class = {"LLMRerank": LLMRerank, "FaithragCrossValRerank": FaithragCrossValRerank}
    llm = ScriptedLLM(respond=lambda prompt: choice_select(prompt) if "relevance score" in prompt
                      else bridge_script(prompt))
    engine = SummaryIndex(nodes=bridge_nodes()).as_query_engine(
        llm=llm, node_postprocessors=[rerank_class[reranker](llm=llm, top_n=3),
                                      SimilarityPostprocessor(similarity_cutoff=0.5)])
    response = engine.query(QUESTION)
    scores = [n.score for n in response.source_nodes]
    assert 1 <= len(scores) <= 3 and scores == sorted(scores, reverse=True)
    assert all(score >= 0.5 for score in scores) and response.response
    if reranker == "FaithragCrossValRerank":
        assert [n.node.node_id for n in response.source_nodes] == ["walk", "survey"]


def test_postprocessor_in_a_query_engine_over_a_keyword_index():
    llm = scripted()
    index = SimpleKeywordTableIndex(nodes=bridge_nodes())
    engine = index.as_query_engine(node_postprocessors=[FaithragCrossValRerank(llm=llm)])
    response = engine.query(QUESTION)
    kept = [n.node.node_id for n in response.source_nodes]
    assert sorted(kept) == ["history", "survey", "walk"]
    assert response.metadata["history"]["faithrag_removed"][0]["node_id"] == "blog"
    assert any(request.purpose == "cross_validate" for request in llm.calls)


def test_no_nodes_need_no_model_and_a_missing_query_is_refused():
    llm = scripted()
    reranker = FaithragCrossValRerank(llm=llm)
    assert reranker.postprocess_nodes([], query_str=QUESTION) == []
    assert not llm.calls
    with pytest.raises(InputError, match="needs the query") as error:
        reranker.postprocess_nodes(scored(bridge_nodes()))
    assert "query_str=" in error.value.hint
    assert not llm.calls


def test_nodes_without_text_shared_ids_and_odd_metadata_types_are_passages():
    llm = scripted()
    nodes = scored([TextNode(id_="a", text="The Aldermoor Bridge opened in 1887.",
                             metadata={"title": 1887, "file_path": Path("/d/a.txt")}),
                    TextNode(id_="a", text="", metadata={"title": None, "url": 42}),
                    TextNode(id_="a", text="Its piers are granite."),
                    TextNode(id_="", text="Built of stone.", metadata={"title": ""})])
    kept = FaithragCrossValRerank(llm=llm).postprocess_nodes(nodes, query_str=QUESTION)
    assert [n.node.node_id for n in kept] == ["a", "a", "a", ""]
    assert [n.node.get_content() for n in kept] == [n.node.get_content() for n in nodes]
    prompt = llm.calls[0].messages[-1].content
    assert '<passage id="1" title="1887">' in prompt
    assert '<passage id="2">\n\n</passage>' in prompt  # the node without text, empty


def test_postprocessor_runs_async_as_llamaindex_postprocessors_do():
    kept = asyncio.run(FaithragCrossValRerank(llm=scripted()).apostprocess_nodes(
        scored(bridge_nodes()), query_str=QUESTION))
    assert [n.node.node_id for n in kept] == ["history", "survey", "walk"]


def test_serialisation_keeps_the_configuration_and_never_the_key():
    reranker = FaithragCrossValRerank(llm=FakeLLM(), backend="openai",
                                             base_url="http://127.0.0.1:9/v1", model="m",
                                             llm__api_key="secret", rerank__max_rounds=1)
    data = reranker.to_dict()
    assert data["class_name"] == "FaithragCrossValRerank"
    assert "secret" not in reranker.to_json()
    assert data["config"]["llm"]["base_url"] == "http://127.0.0.1:9/v1"
    assert data["config"]["pipeline"]["rerank"] == "crossval"
    again = FaithragCrossValRerank.from_dict(data, llm=scripted())
    assert again.config == reranker.config and again.config["rerank"]["max_rounds"] == 1
    kept = again.postprocess_nodes(scored(bridge_nodes()), query_str=QUESTION)
    assert len(kept) == 3


def test_components_force_their_own_stage_whatever_the_configuration_says(tmp_path, trusted):
    toml = tmp_path / "faithrag.toml"
    toml.write_text(f'[pipeline]\nrerank = "listwise"\nverify = "antisyco"\n\n'
                    f'[antisyco]\nkb = "{trusted}"\n')
    reranker = FaithragCrossValRerank(toml, llm=FakeLLM())
    assert reranker.config["pipeline"] == {**reranker.config["pipeline"], "rerank": "crossval",
                                           "verify": None}
    verifier = FaithragVerifier(Config.load(toml), llm=FakeLLM())
    assert verifier.config["pipeline"]["rerank"] is None
    assert verifier.config["antisyco"]["kb"] == str(trusted)


def test_bad_settings_are_refused_before_a_model_loads(monkeypatch):
    monkeypatch.setattr(faithrag.llm, "load_llm", lambda config: pytest.fail("model loaded"))
    with pytest.raises(ConfigError, match="max_rounds"):
        FaithragCrossValRerank(backend="openai", rerank__max_rounds=-1)
    with pytest.raises(ConfigError, match="kb"):
        FaithragVerifier(backend="openai")


def test_a_missing_extra_names_the_pip_command(monkeypatch):
    for name in [m for m in sys.modules if m.split(".")[0] == "llama_index"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "faithrag.integrations.llamaindex")
    with pytest.raises(MissingExtraError, match="LlamaIndex adapter") as error:
        importlib.import_module("faithrag.integrations.llamaindex")
    assert error.value.hint == "pip install 'faithrag[llamaindex]'"


# ----------------------------------------------------------------- the verifier

def test_verifier_repairs_a_response_and_records_its_decision(trusted):
    nodes = scored(bridge_nodes()[:2])
    draft = Response("The bridge opened in 1921.", source_nodes=nodes,
                     metadata={"history": {"title": "Aldermoor history"}})
    llm = scripted()
    # every judgement asked, so that the relevance request shows the evidence
    verified = FaithragVerifier(llm=llm, kb=trusted, antisyco__judgements="all").verify(
        QUESTION, draft)
    assert isinstance(verified, Response) and verified is not draft
    assert verified.response == "1887"
    record = verified.metadata["faithrag"]
    assert record["decision"] == "REPAIR" and record["draft"] == "The bridge opened in 1921."
    assert any("contradicted by the trusted knowledge base" in r for r in record["reasons"])
    assert [c["kind"] for c in record["conflicts"]] == ["contradicted_by_trusted_kb"]
    assert verified.metadata["history"] == {"title": "Aldermoor history"}
    assert verified.source_nodes == nodes
    relevance = next(c for c in llm.calls if c.purpose == "relevance").messages[-1].content
    assert "opened in 1921, says a blog" in relevance  # the response's nodes are the evidence
    assert draft.response == "The bridge opened in 1921."


def test_verifier_takes_a_string_draft_with_its_nodes_and_keeps_a_supported_one(trusted):
    llm = FakeLLM(lambda request: {**VERIFY_REPLIES, "contradiction": "ANSWER: 1887"}[
        request.purpose])
    nodes = scored(bridge_nodes()[:1])
    verified = FaithragVerifier(llm=llm, kb=trusted).verify(QUESTION, "1887", nodes=nodes)
    assert verified.response == "1887"
    assert verified.metadata["faithrag"]["decision"] == "PASS"
    assert verified.source_nodes == nodes


def test_verifier_refuses_an_empty_draft_before_any_model_call(trusted):
    llm = scripted()
    verifier = FaithragVerifier(llm=llm, kb=trusted)
    with pytest.raises(InputError, match="draft answer is empty"):
        verifier.verify(QUESTION, Response(None, source_nodes=scored(bridge_nodes())))
    assert not llm.calls


def test_verifier_reads_a_streamed_response_and_refuses_other_kinds(trusted):
    nodes = scored(bridge_nodes()[:2])
    streamed = StreamingResponse(response_gen=iter(["The bridge opened ", "in 1921."]),
                                 source_nodes=nodes)
    verifier = FaithragVerifier(llm=scripted(), kb=trusted)
    verified = verifier.verify(QueryBundle(QUESTION), streamed)
    assert verified.metadata["faithrag"]["draft"] == "The bridge opened in 1921."
    assert verified.metadata["faithrag"]["decision"] == "REPAIR" and verified.source_nodes == nodes
    with pytest.raises(InputError, match="not a PydanticResponse") as error:
        verifier.verify(QUESTION, PydanticResponse(TextNode(text="1921")))
    assert "verify(query, text, nodes=...)" in error.value.hint


def test_verifier_after_a_query_engine_that_writes_no_text_takes_the_draft_apart(trusted):
    index = SimpleKeywordTableIndex(nodes=bridge_nodes())
    engine = RetrieverQueryEngine.from_args(index.as_retriever(), response_mode="no_text")
    retrieved = engine.query(QUESTION)
    verified = FaithragVerifier(llm=scripted(), kb=trusted).verify(
        QUESTION, "The bridge opened in 1921.", nodes=retrieved.source_nodes)
    assert verified.metadata["faithrag"]["decision"] == "REPAIR"
    assert len(verified.source_nodes) == 4


# ----------------------------------------------------------------- the documented example

def example() -> str:
    block = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)```", DOCS.read_text(), re.DOTALL)
    assert block, "docs/integrations.md (LlamaIndex) lost its example block"
    return block.group(1)


def test_the_documented_example_runs_as_written(tmp_path, monkeypatch, capsys, chat_script):
    """As written, with the scripted LLM in MockLLM's place (tests/test_install.py runs it
    with MockLLM itself on a bare faithrag[llamaindex] install)."""
    (tmp_path / "docs").mkdir()
    for name, text in {"tower.txt": "The Eiffel Tower was completed in 1889 for the fair.",
                       "blog.txt": "A travel blog says the Eiffel Tower was completed in 1925.",
                       "guide.txt": "The Eiffel Tower, completed in 1889, is 330 m tall."}.items():
        (tmp_path / "docs" / name).write_text(text)
    (tmp_path / "trusted").mkdir()
    (tmp_path / "trusted" / "facts.txt").write_text("The Eiffel Tower was completed in 1889.")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(llama_index.core.llms, "MockLLM",
                        lambda: ScriptedLLM(respond=chat_script("1889")))
    exec(compile(example(), str(DOCS), "exec"), {})  # noqa: S102 (the docs' example, as written)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "1889 PASS"
    assert [line.split()[:2] for line in lines[1:3]] == [["1", "1.0"], ["2", "0.5"]]
    assert sorted(line.split()[2] for line in lines[1:3]) == ["guide.txt", "tower.txt"]
    (removed,) = ast.literal_eval(lines[3])
    assert removed["reason"].startswith("conflicts with") and len(lines) == 4


# ----------------------------------------------------------------- the tiny model

@pytest.mark.model
def test_tiny_model_in_a_llamaindex_query_engine(tiny_gguf, trusted):
    nodes = bridge_nodes() + [TextNode(id_="canal", text="The Aldermoor canal opened in 1790.")]
    llm = load_llm(LLMConfig(model=str(tiny_gguf), n_ctx=2048, n_threads=1))
    try:
        reranker = FaithragCrossValRerank(llm=llm, rerank__max_rounds=1,
                                                 rerank__passage_tokens=64,
                                                 rerank__reason_tokens=48)
        engine = RetrieverQueryEngine.from_args(
            SimpleKeywordTableIndex(nodes=nodes).as_retriever(),
            node_postprocessors=[reranker], response_mode="no_text")
        response = engine.query(QUESTION)
        verified = FaithragVerifier(llm=llm, kb=trusted).verify(
            QUESTION, "The Aldermoor Bridge opened in 1921.", nodes=response.source_nodes)
    finally:
        llm.close()
    kept = [n.node.node_id for n in response.source_nodes]
    removed = [r["node_id"] for r in response.source_nodes[0].node.metadata["faithrag_removed"]]
    assert kept and len(set(kept)) == len(kept) and not set(kept) & set(removed)
    assert set(kept) | set(removed) <= {n.node_id for n in nodes}
    assert [n.node.metadata["faithrag_rank"] for n in response.source_nodes] == list(
        range(1, len(kept) + 1))
    record = verified.metadata["faithrag"]
    assert record["decision"] in ("PASS", "REPAIR", "FALLBACK") and verified.response
    assert record["draft"] == "The Aldermoor Bridge opened in 1921."
    assert isinstance(record["conflicts"], list)
    assert verified.source_nodes == response.source_nodes

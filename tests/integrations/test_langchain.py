"""The LangChain adapter against the real langchain-core: the re-ranker as a document compressor,
the verifier as a Runnable in LCEL chains, on the scripted model; and on the tiny model inside a
LangChain RAG chain (BM25Retriever, ContextualCompressionRetriever, ChatLlamaCpp)."""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.load import dumps, loads
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from pydantic import Field

import faithrag
import faithrag.llm
from faithrag.errors import ConfigError, InputError, MissingExtraError
from faithrag.integrations.langchain import (
    CONFLICTS_KEY,
    RANK_KEY,
    REMOVED_KEY,
    SCORE_KEY,
    FaithragReranker,
    FaithragVerifier,
    to_passages,
)
from faithrag.llm.fake import FakeLLM

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
MARKER = "<!-- example: tests/integrations/test_langchain.py runs this block as written -->"
QUESTION = "When was the Eiffel Tower completed?"
SHOWN = re.compile(r'<passage id="(\w+)"[^>]*>\n(.*?)\n</passage>', re.DOTALL)
REPLIES = {"rank": "[1] > [2] > [3]",
           "relevance": "RELEVANCE: RELEVANT\nSCORE: 0.9", "support": "SUPPORT: SUPPORTED",
           "claims": "- The Eiffel Tower was completed in 1925.",
           "contradiction": "ANSWER: 1889", "repair": "1889", "fallback": "1889"}


def respond(request):
    """The scripted model: detection names the first two passages that disagree on the year;
    cross-validation calls false the side the other passages disagree with; the verifier's
    knowledge base answers 1889, so a draft of 1925 is repaired."""
    user = request.messages[-1].content
    shown = SHOWN.findall(user)
    years = {label: re.search(r"1\d{3}", text).group(0) for label, text in shown}
    if request.purpose == "detect_conflict":
        pairs = [(a, b) for a in years for b in years if a < b and years[a] != years[b]]
        return f"Conflict: [{pairs[0][0]}] [{pairs[0][1]}]" if pairs else "Conflict: None"
    if request.purpose == "cross_validate":
        others = [y for label, y in years.items() if label not in "AB"]
        false = "A" if others.count(years["A"]) < others.count(years["B"]) else "B"
        return f"Reason: {false} disagrees with the other passages.\nFalse passage: {false}"
    return REPLIES[request.purpose]


def scripted() -> FakeLLM:
    return FakeLLM(respond)


class ScriptedChat(BaseChatModel):
    """A LangChain chat model whose reply is `respond(last message's text)`; it reports token
    usage as a provider's model does."""

    respond: Any
    prompts: list = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.prompts.append(messages)
        message = AIMessage(self.respond(messages[-1].content),
                            usage_metadata={"input_tokens": 100, "output_tokens": 5,
                                            "total_tokens": 105})
        return ChatResult(generations=[ChatGeneration(message=message)])


def eiffel_documents() -> list[Document]:
    return [Document("The Eiffel Tower was completed in 1889.", id="tower",
                     metadata={"source": "tower.txt", "title": "Eiffel Tower", "year": 1889}),
            Document("A travel blog says the Eiffel Tower was completed in 1925.", id="blog",
                     metadata={"source": "blog.txt"}),
            Document("The Eiffel Tower opened to visitors in 1889.", id="visitors")]


@pytest.fixture
def trusted(tmp_path) -> Path:
    (tmp_path / "trusted").mkdir()
    (tmp_path / "trusted" / "facts.txt").write_text("The Eiffel Tower was completed in 1889.")
    return tmp_path / "trusted"


def verifier(trusted, llm=None, **kwargs) -> FaithragVerifier:
    # FakeLLM tokens are bytes: room for a two-line judgement
    return FaithragVerifier(llm=llm or scripted(), kb=trusted,
                            settings={"antisyco__judge_tokens": 64}, **kwargs)


# ---------------------------------------------------------------- the re-ranker


def test_reranker_drops_the_false_side_and_keeps_the_reason_on_every_kept_document():
    documents = eiffel_documents()
    kept = FaithragReranker(llm=scripted()).compress_documents(documents, QUESTION)
    assert [d.id for d in kept] == ["tower", "visitors"]
    assert [d.metadata[RANK_KEY] for d in kept] == [1, 2]
    for document in kept:
        (removed,) = document.metadata[REMOVED_KEY]
        assert removed["id"] == "blog" and removed["reason"].startswith("conflicts with tower")
        (conflict,) = document.metadata[CONFLICTS_KEY]
        assert (conflict["kind"], conflict["action"]) == ("passage_vs_passage", "removed")
    assert kept[0].metadata["source"] == "tower.txt" and kept[0].metadata["year"] == 1889
    assert all(type(d) is Document for d in kept)
    assert documents[0].metadata == {"source": "tower.txt", "title": "Eiffel Tower",
                                     "year": 1889}  # the input is not changed


def test_reranker_orders_as_the_model_ranks_scores_as_langchains_rerankers_and_cuts_at_top_n():
    llm = FakeLLM(lambda r: "Conflict: None" if r.purpose == "detect_conflict"
                  else "[3] > [1] > [2] > [5] > [4]")
    documents = [Document("The Eiffel Tower was completed in 1889.", id=name)
                 for name in ("a", "b", "c", "d", "e")]
    kept = FaithragReranker(llm=llm).compress_documents(documents, QUESTION)
    assert [d.id for d in kept] == ["c", "a", "b"]  # top_n is 3, as in LangChain's re-rankers
    assert [d.metadata[SCORE_KEY] for d in kept] == [1.0, 0.8, 0.6]  # rank scores, descending
    every = FaithragReranker(llm=llm, top_n=None).compress_documents(documents, QUESTION)
    assert [d.id for d in every] == ["c", "a", "b", "e", "d"]
    assert [d.metadata[SCORE_KEY] for d in every] == [1.0, 0.8, 0.6, 0.4, 0.2]
    top = FaithragReranker(llm=llm, top_n=1).compress_documents(documents, QUESTION)
    assert [(d.id, d.metadata[REMOVED_KEY]) for d in top] == [("c", [])]


def test_reranker_in_a_contextual_compression_retriever_over_bm25():
    bm25 = pytest.importorskip("langchain_community.retrievers",
                               reason="langchain-community and rank-bm25 are not installed")
    compression = pytest.importorskip("langchain_classic.retrievers",
                                      reason="langchain-classic is not installed")
    retriever = compression.ContextualCompressionRetriever(
        base_compressor=FaithragReranker(llm=scripted()),
        base_retriever=bm25.BM25Retriever.from_documents(
            [*eiffel_documents(), Document("The Golden Gate Bridge opened in 1937.", id="gg")],
            k=3))
    kept = retriever.invoke("When was the Eiffel Tower completed?")
    assert {d.id for d in kept} == {"tower", "visitors"}
    assert kept[0].metadata[REMOVED_KEY][0]["id"] == "blog"


def test_both_components_run_on_the_apps_langchain_chat_model(bridge_script, tmp_path):
    (tmp_path / "facts.txt").write_text("The Aldermoor Bridge opened to traffic in 1887.")
    chat = ScriptedChat(respond=bridge_script)
    documents = [Document("The Aldermoor Bridge opened in 1887.", id="history"),
                 Document("A blog says the Aldermoor Bridge opened in 1921.", id="blog"),
                 Document("The Aldermoor Bridge has carried traffic since 1887.", id="survey")]
    kept = FaithragReranker(llm=chat).compress_documents(documents, "When did it open?")
    assert [d.id for d in kept] == ["survey", "history"]  # blog removed; the script reverses
    assert kept[0].metadata[REMOVED_KEY][0]["id"] == "blog"
    out = FaithragVerifier(llm=chat, kb=tmp_path).invoke(
        {"question": "When did the Aldermoor Bridge open?", "documents": kept, "answer": "1921"})
    assert (out["answer"], out["decision"]) == ("1887", "REPAIR")
    assert {type(m).__name__ for prompt in chat.prompts for m in prompt} == {"SystemMessage",
                                                                             "HumanMessage"}


def test_a_chat_model_with_a_setting_that_scores_options_is_refused_when_built():
    chat = ScriptedChat(respond=lambda text: "")
    with pytest.raises(ConfigError, match="rerank.verdict='support'") as error:
        FaithragReranker(llm=chat, settings={"rerank__verdict": "support"})
    assert "faithrag.load_llm" in error.value.hint
    assert not chat.prompts


class OverlapRerankClient:
    """Stands for Cohere's rerank client under LangChain's CohereRerank: scores each document
    by the share of the query's words it holds."""

    def rerank(self, query, documents, model, top_n, max_chunks_per_doc):
        words = set(query.lower().split())
        scores = [len(words & set(d.lower().split())) / len(words) for d in documents]
        order = sorted(range(len(documents)), key=lambda i: -scores[i])[:top_n]
        return [SimpleNamespace(index=i, relevance_score=scores[i]) for i in order]


def scoring_rag_app(compressor):
    """An app written for a LangChain re-ranker that scores (CohereRerank, FlashrankRerank):
    BM25, the re-ranker in a ContextualCompressionRetriever, then only the documents whose
    `relevance_score` reaches 0.5 go into the prompt."""
    bm25 = pytest.importorskip("langchain_community.retrievers",
                               reason="langchain-community and rank-bm25 are not installed")
    compression = pytest.importorskip("langchain_classic.retrievers",
                                      reason="langchain-classic is not installed")
    corpus = [Document("The Aldermoor Bridge opened in 1887.", id="history"),
              Document("A blog says the Aldermoor Bridge opened in 1921.", id="blog"),
              Document("The Aldermoor Bridge has carried traffic since 1887.", id="survey"),
              Document("Walkers cross the Aldermoor Bridge, opened 1887.", id="walk"),
              Document("The Golden Gate Bridge opened in 1937.", id="golden-gate")]
    retriever = compression.ContextualCompressionRetriever(
        base_compressor=compressor,
        base_retriever=bm25.BM25Retriever.from_documents(corpus, k=4))
    documents = retriever.invoke("When did the Aldermoor Bridge open?")
    prompt_documents = [d for d in documents if d.metadata["relevance_score"] >= 0.5]
    return documents, prompt_documents


@pytest.mark.filterwarnings("ignore:The class `CohereRerank` was deprecated")
@pytest.mark.parametrize("reranker", ["CohereRerank", "FaithragReranker"])
def test_an_app_written_for_langchains_reranker_keeps_working_with_faithrags(reranker,
                                                                             bridge_script):
    if reranker == "CohereRerank":
        from langchain_classic.retrievers.document_compressors import CohereRerank
        compressor = CohereRerank(client=OverlapRerankClient())
    else:
        compressor = FaithragReranker(llm=ScriptedChat(respond=bridge_script))
    documents, prompt_documents = scoring_rag_app(compressor)
    scores = [d.metadata["relevance_score"] for d in documents]
    assert len(documents) == 3 and scores == sorted(scores, reverse=True)  # top_n 3, sorted
    assert prompt_documents == documents[:len(prompt_documents)] and prompt_documents
    if reranker == "FaithragReranker":
        assert "blog" not in [d.id for d in documents]
        assert scores == [1.0, 2 / 3, 1 / 3]


def test_no_documents_give_none_without_loading_the_model():
    reranker = FaithragReranker(settings={"model": "/nonexistent/model.gguf"})
    assert reranker.compress_documents([], QUESTION) == []
    assert reranker.compress_documents([Document("  "), Document("")], QUESTION) == []


def test_blank_documents_are_dropped_with_the_reason_no_text():
    documents = [*eiffel_documents(), Document(" \n", id="empty")]
    kept = FaithragReranker(llm=scripted()).compress_documents(documents, QUESTION)
    assert [d.id for d in kept] == ["tower", "visitors"]
    reasons = {r["id"]: r["reason"] for r in kept[0].metadata[REMOVED_KEY]}
    assert set(reasons) == {"blog", "empty"} and reasons["empty"].startswith("no text")


def test_passages_take_id_title_source_and_ids_are_made_unique():
    documents = [Document("one", id="x", metadata={"title": "T", "source": Path("a/b.txt")}),
                 Document("two", id="x"), Document("three"), Document(""),
                 Document("four", metadata={"title": None, "source": 7})]
    passages, by_id, blank = to_passages(documents)
    assert [(p.id, p.title, p.source) for p in passages] == [
        ("x", "T", str(Path("a/b.txt"))), ("x~2", "", ""), ("doc-2", "", ""),
        ("doc-4", "", "7")]
    assert by_id["x~2"] is documents[1] and blank == [documents[3]]


def test_reranker_refuses_what_is_not_a_document_and_an_empty_query():
    reranker = FaithragReranker(llm=scripted())
    with pytest.raises(InputError, match="Item 1 .* str, not a langchain_core"):
        reranker.compress_documents([eiffel_documents()[0], "text"], QUESTION)
    with pytest.raises(InputError, match="question is empty"):
        reranker.compress_documents(eiffel_documents(), "  ")


def test_reranker_async_compression_gives_the_same_documents():
    reranker = FaithragReranker(llm=scripted())
    kept = asyncio.run(reranker.acompress_documents(eiffel_documents(), QUESTION))
    assert [d.id for d in kept] == ["tower", "visitors"]


def test_reranker_fields_dump_and_rebuild_without_the_llm(tmp_path):
    (tmp_path / "faithrag.toml").write_text("[rerank]\nmax_rounds = 1\n")
    reranker = FaithragReranker(llm=scripted(), config=tmp_path / "faithrag.toml",
                                settings={"rerank__both_orders": False}, top_n=2)
    dumped = reranker.model_dump()
    assert dumped == {"config": str(tmp_path / "faithrag.toml"),
                      "settings": {"rerank__both_orders": False}, "rerank": "crossval",
                      "top_n": 2}
    rebuilt = FaithragReranker(**dumped, llm=scripted())
    assert [d.id for d in rebuilt.compress_documents(eiffel_documents(), QUESTION)] == [
        "tower", "visitors"]
    config = rebuilt._pipeline.config
    assert config.rerank.max_rounds == 1 and config.rerank.both_orders is False


# ---------------------------------------------------------------- configuration and loading


def test_configuration_is_checked_when_a_component_is_built(monkeypatch):
    monkeypatch.setattr(faithrag.llm, "load_llm", lambda config: pytest.fail("model loaded"))
    with pytest.raises(ConfigError, match="reranker 'nope'|nope"):
        FaithragReranker(rerank="nope")
    with pytest.raises(ConfigError):
        FaithragReranker(settings={"no_such__key": 1})
    with pytest.raises(ConfigError, match="'rerank' is set by the component"):
        FaithragReranker(settings={"rerank": "crossval"})
    with pytest.raises(ConfigError, match="trusted knowledge base"):
        FaithragVerifier()
    with pytest.raises(ConfigError, match="'antisyco__kb' is set by the component"):
        FaithragVerifier(kb="a", settings={"antisyco__kb": "b"})
    with pytest.raises(ConfigError, match="not the name 'openai'") as info:
        FaithragReranker(llm="openai")
    assert "backend='openai'" in info.value.hint


def test_the_model_loads_from_settings_once_on_first_use(monkeypatch):
    loaded = []

    def load(config):
        loaded.append(config)
        return scripted()

    monkeypatch.setattr(faithrag.llm, "load_llm", load)
    reranker = FaithragReranker(settings={"backend": "openai", "base_url": "http://h:1/v1"})
    assert loaded == []
    for _ in range(2):
        reranker.compress_documents(eiffel_documents(), QUESTION)
    (config,) = loaded
    assert config.backend == "openai" and config.base_url == "http://h:1/v1"


def test_a_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.delitem(sys.modules, "faithrag.integrations.langchain")
    monkeypatch.setitem(sys.modules, "langchain_core.documents", None)
    with pytest.raises(MissingExtraError) as raised:
        importlib.import_module("faithrag.integrations.langchain")
    assert raised.value.hint == "pip install 'faithrag[langchain]'"


# ---------------------------------------------------------------- the verifier


def test_verifier_repairs_a_contradicted_draft_and_reports_its_decision(trusted):
    out = verifier(trusted).invoke({"question": QUESTION, "documents": eiffel_documents(),
                                    "answer": "1925", "session": 7})
    assert (out["answer"], out["draft"], out["decision"]) == ("1889", "1925", "REPAIR")
    assert [c["kind"] for c in out["conflicts"]] == ["contradicted_by_trusted_kb"]
    assert out["session"] == 7
    assert out["verification"]["decision"] == "REPAIR"
    assert "contradicted by the trusted knowledge base" in out["verification"]["reasons"][0]
    assert [d.id for d in out["documents"]] == ["tower", "blog", "visitors"]


def test_verifier_passes_a_consistent_draft_given_as_a_chat_message(trusted):
    out = verifier(trusted).invoke({"question": QUESTION, "documents": eiffel_documents(),
                                    "answer": AIMessage("1889")})
    assert (out["answer"], out["draft"], out["decision"]) == ("1889", "1889", "PASS")


def test_verifier_ends_an_lcel_chain_and_batches(trusted):
    draft = RunnableLambda(lambda x: "1925" if x["documents"] else "1889")
    chain = RunnablePassthrough.assign(answer=draft) | verifier(trusted)
    out = chain.batch([{"question": QUESTION, "documents": eiffel_documents()},
                       {"question": QUESTION, "documents": []}])
    # the first draft is contradicted by the knowledge base; the second has no retrieved
    # evidence, but the knowledge base confirms it
    assert [(o["draft"], o["decision"]) for o in out] == [("1925", "REPAIR"), ("1889", "PASS")]
    assert asyncio.run(chain.ainvoke({"question": QUESTION,
                                      "documents": eiffel_documents()}))["answer"] == "1889"


def test_verifier_shows_only_documents_with_text(trusted):
    llm = scripted()
    FaithragVerifier(llm=llm, kb=trusted, settings={"antisyco__judge_tokens": 64,
                                                    "antisyco__judgements": "all"}).invoke(
        {"question": QUESTION, "answer": "1889",
         "documents": [Document(""), *eiffel_documents()[:1]]})
    reflection = next(c for c in llm.calls if c.purpose == "relevance")
    assert SHOWN.findall(reflection.messages[-1].content) == [
        ("1", "The Eiffel Tower was completed in 1889.")]


def test_verifier_runs_as_a_chain_run_for_callbacks(trusted):
    class Runs(BaseCallbackHandler):
        def __init__(self):
            self.events = []

        def on_chain_start(self, serialized, inputs, **kwargs):
            self.events.append(("start", kwargs.get("name")))

        def on_chain_end(self, outputs, **kwargs):
            self.events.append(("end", outputs["decision"]))

    runs = Runs()
    verifier(trusted).invoke({"question": QUESTION, "documents": eiffel_documents(),
                              "answer": "1889"}, config={"callbacks": [runs]})
    assert runs.events == [("start", "FaithragVerifier"), ("end", "PASS")]


@pytest.mark.parametrize(("given", "message"), [
    ("1925", "takes a dict, not a str"),
    ({"question": QUESTION, "documents": []}, "lacks 'answer'"),
    ({"documents": [], "answer": "1"}, "lacks 'question'"),
    ({"question": QUESTION, "documents": "text", "answer": "1"}, "list of Documents"),
    ({"question": QUESTION, "documents": [{"page_content": "x"}], "answer": "1"},
     "Item 0 .* dict"),
    ({"question": 3, "documents": [], "answer": "1"}, "question is a int"),
    ({"question": QUESTION, "documents": [], "answer": None}, "answer is a NoneType"),
    ({"question": QUESTION, "documents": [], "answer": " "}, "draft answer is empty"),
    ({"question": " ", "documents": [], "answer": "1"}, "question is empty"),
])
def test_verifier_refuses_bad_input_with_a_typed_error(trusted, given, message):
    with pytest.raises(InputError, match=message):
        verifier(trusted).invoke(given)


def test_verifier_serialises_without_its_llm_and_loads_back(trusted):
    text = dumps(verifier(trusted))
    assert "FakeLLM" not in text and "llm" not in text
    restored = loads(text, valid_namespaces=["faithrag"], allowed_objects=[FaithragVerifier])
    assert isinstance(restored, FaithragVerifier) and restored.llm is None
    assert (restored.kb, restored.settings) == (str(trusted), {"antisyco__judge_tokens": 64})
    rebuilt = FaithragVerifier(**restored.model_dump(), llm=scripted())
    out = rebuilt.invoke({"question": QUESTION, "documents": [], "answer": "1925"})
    assert out["decision"] == "REPAIR"


# ---------------------------------------------------------------- the documented example


def example() -> str:
    block = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)```",
                      DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert block, "docs/integrations.md (LangChain) lost its example block"
    return block.group(1)


def test_the_documented_example_runs_as_written(trusted, monkeypatch, capsys):
    assert len(example().strip().splitlines()) <= 15
    monkeypatch.chdir(trusted.parent)
    monkeypatch.setattr(faithrag, "load_llm", lambda config: scripted())
    exec(compile(example(), str(DOC), "exec"), {})  # noqa: S102 (the docs, as written)
    reranked, verified = capsys.readouterr().out.splitlines()
    assert reranked.startswith("['tower', 'visitors'] [{'id': 'blog', 'reason': 'conflicts")
    assert verified.startswith("1889 REPAIR [{'kind': 'contradicted_by_trusted_kb'")


# ---------------------------------------------------------------- the tiny model


@pytest.mark.model
@pytest.mark.slow
def test_tiny_model_in_a_langchain_rag_chain(tiny_gguf, tmp_path):
    """BM25Retriever -> ContextualCompressionRetriever(FaithragReranker) -> prompt | ChatLlamaCpp
    -> FaithragVerifier, the app's one chat model (ChatLlamaCpp on the tiny model) drafting and
    running both stages: structure, not quality."""
    community = pytest.importorskip("langchain_community.retrievers",
                                    reason="langchain-community and rank-bm25 are not installed")
    chat_models = pytest.importorskip("langchain_community.chat_models")
    compression = pytest.importorskip("langchain_classic.retrievers",
                                      reason="langchain-classic is not installed")
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableParallel

    (tmp_path / "trusted").mkdir()
    (tmp_path / "trusted" / "bridge.txt").write_text("The Aldermoor Bridge opened in 1887.")
    corpus = [
        Document("The Aldermoor Bridge opened in 1887.", id="history",
                 metadata={"source": "history.txt"}),
        Document("A travel blog claims the Aldermoor Bridge opened in 1921.", id="blog",
                 metadata={"source": "blog.txt"}),
        Document("The Aldermoor Bridge has carried traffic since 1887.", id="survey"),
        Document("Walkers cross the Aldermoor Bridge, opened 1887, to reach the mill.",
                 id="walk"),
        Document("The Golden Gate Bridge opened in 1937.", id="golden-gate")]
    chat = chat_models.ChatLlamaCpp(model_path=str(tiny_gguf), n_ctx=2048, n_threads=1,
                                    max_tokens=64, temperature=0, verbose=False)
    retriever = compression.ContextualCompressionRetriever(
        base_compressor=FaithragReranker(llm=chat, top_n=None,
                                         settings={"rerank__max_rounds": 1}),
        base_retriever=community.BM25Retriever.from_documents(corpus, k=4))
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer the question in a few words from the documents."),
        ("human", "{context}\n\nQuestion: {question}")])

    def context(state):
        return {"question": state["question"],
                "context": "\n".join(d.page_content for d in state["documents"])}

    chain = (RunnableParallel(question=RunnablePassthrough(), documents=retriever)
             | RunnablePassthrough.assign(answer=context | prompt | chat | StrOutputParser())
             | FaithragVerifier(llm=chat, kb=tmp_path / "trusted",
                                settings={"antisyco__max_claims": 1}))
    out = chain.invoke("When did the Aldermoor Bridge open?")
    documents = out["documents"]
    assert 2 <= len(documents) <= 4
    assert {d.id for d in documents} <= {"history", "blog", "survey", "walk", "golden-gate"}
    assert [d.metadata[RANK_KEY] for d in documents] == list(range(1, len(documents) + 1))
    scores = [d.metadata[SCORE_KEY] for d in documents]
    assert scores == sorted(scores, reverse=True) and scores[0] == 1.0
    removed = documents[0].metadata[REMOVED_KEY]
    assert len(documents) + len(removed) == 4
    assert all(r["reason"] for r in removed)
    assert isinstance(documents[0].metadata[CONFLICTS_KEY], list)
    assert out["decision"] in ("PASS", "REPAIR", "FALLBACK")
    assert isinstance(out["answer"], str) and out["draft"].strip()
    assert out["verification"]["reasons"]

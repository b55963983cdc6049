import pytest

from faithrag.cli.demo import DEMO_RUNS
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.pipeline import configure


def test_overrides_reach_every_section_and_leave_the_base_alone():
    base = Config()
    config = configure(base, {"pipeline.rerank": "crossval", "rerank.verdict": "support"})
    assert (config.pipeline.rerank, config.rerank.verdict) == ("crossval", "support")
    assert (base.pipeline.rerank, base.rerank.verdict) == (Config().pipeline.rerank, "pairwise")
    assert config.rerank.window == base.rerank.window  # untouched keys carried over


def test_demo_shows_crossval_with_both_verdicts_whatever_the_configured_one():
    configured = Config.load(overrides={"rerank.verdict": "support"})
    verdicts = [configure(configured, overrides).rerank.verdict
                for _, overrides in DEMO_RUNS if overrides.get("pipeline.rerank") == "crossval"]
    assert sorted(verdicts) == ["pairwise", "support"]


@pytest.mark.parametrize("overrides", [{"rerank.verdikt": "support"},
                                       {"rerank.verdict": "majority"}])
def test_an_unknown_key_or_a_bad_value_is_refused(overrides):
    with pytest.raises(ConfigError):
        configure(Config(), overrides)


def test_the_demo_sets_plain_rag_beside_the_defaults_case_by_case(monkeypatch, capsys):
    from faithrag import FakeLLM
    from faithrag.cli import demo, main

    monkeypatch.setattr(demo, "load_llm", lambda config: FakeLLM(
        [("Harrow", "Edith Marlow"), ("Road", "Cormac McCarthy"), ("capital", "Sydney")],
        default="1887"))
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    progress = [line for line in out.splitlines() if line.startswith("[")]
    assert [line.split(":")[0] for line in progress] == [
        "[1/5] case 1, passages disagree", "[2/5] case 2, one name, two subjects",
        "[3/5] case 3, poisoned retrieval", "[4/5] case 4, context vs memory",
        "[5/5] case 5, an edited copy"]
    # plain RAG gives one designer of two and says which reading it kept quiet about
    assert "plain RAG (--plain)          ✗ Edith Marlow  (silent: the evidence also says " \
           "Tomas Reyes)" in out
    assert out.count("  faithrag, the defaults ") == 5
    assert out.count("  faithrag + --kb trusted/ ") == 1  # only where a trusted source pays
    summary = out.splitlines()[-1]
    assert summary.startswith("Right or shown with sources: plain RAG (--plain) ")
    assert summary.endswith("faithrag + --kb trusted/ 1/1")  # counted over the cases it ran


def test_all_methods_runs_every_case_with_every_method_alone(monkeypatch, capsys):
    from faithrag import FakeLLM
    from faithrag.cli import demo, main

    monkeypatch.setattr(demo, "load_llm", lambda config: FakeLLM(default="1887"))
    assert main(["demo", "--all-methods", "--case", "1"]) == 0
    out = capsys.readouterr().out
    summary = out.splitlines()[-1]
    assert all(f"{label} " in summary for label, _ in DEMO_RUNS)
    assert "vanilla RAG 1/1" in summary  # 1887, the answer expected

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

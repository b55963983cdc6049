"""Configuration sections: declared once, in their stage's module, and assembled into Config."""

from __future__ import annotations

import pickle

import pytest

from faithrag import config, registry, sections
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.methods.cfrag.settings import CFRAGConfig
from faithrag.methods.csrag.settings import CSRAGConfig


def test_config_is_the_core_sections_then_the_registered_ones_then_the_server():
    stage_sections = list(sections.registered())
    assert stage_sections == sorted(stage_sections)
    assert {"antisyco", "cfrag", "conflicts", "csrag", "poison_filter", "rerank"} <= set(
        stage_sections)
    assert list(Config.model_fields) == ["llm", "retrieval", "generation", "pipeline",
                                         *stage_sections, "server", "use_cache"]
    assert all(Config.model_fields[name].annotation is cls
               for name, cls in sections.registered().items())


def test_every_stage_names_a_section_that_exists():
    for entry in registry.KINDS:
        for spec in registry.stages(entry.kind):
            assert spec.section is None or spec.section in Config.model_fields


def test_a_section_is_found_under_its_class_name_in_the_config_module_too():
    assert config.CSRAGConfig is CSRAGConfig and config.CFRAGConfig is CFRAGConfig
    assert Config().cfrag == CFRAGConfig()
    with pytest.raises(AttributeError):
        config.NoSuchConfig  # noqa: B018


def test_a_section_is_declared_once_and_before_config_is_assembled():
    with pytest.raises(ValueError, match="after Config was assembled"):
        @sections.section("late")
        class Late(sections.Section):
            x: int = 0


def test_sections_refuse_unknown_keys_and_bad_assignments_and_config_pickles():
    with pytest.raises(ConfigError, match="csrag"):
        Config.validated({"csrag": {"no_such_key": 1}})
    settings = CSRAGConfig()
    with pytest.raises(ConfigError, match="alpha"):
        settings.alpha = float("nan")
    assert pickle.loads(pickle.dumps(Config())) == Config()

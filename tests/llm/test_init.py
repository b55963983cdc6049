"""Loading a backend from its configuration (faithrag.llm.load_llm)."""

import pytest

from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.llm import load_llm


@pytest.mark.parametrize("given, example", [
    ("tiny", "load_llm(LLMConfig(model='tiny'))"), ("openai", "LLMConfig(backend='openai')"),
    (Config(), "load_llm(config.llm)")])
def test_load_llm_refuses_what_is_not_an_llm_config(given, example):
    with pytest.raises(ConfigError, match="load_llm takes an LLMConfig") as info:
        load_llm(given)
    assert example in info.value.hint

import argparse

import pytest

from faithrag.cli.common import add_method_options, config_from_args, parse_set_options
from faithrag.errors import ConfigError


def test_set_values_are_toml_literals_or_strings():
    assert parse_set_options(["csrag.alpha=-3", "csrag.filter_stopwords=false",
                              "pipeline.method=csrag", 'llm.model="fast"']) == {
        "csrag.alpha": -3, "csrag.filter_stopwords": False, "pipeline.method": "csrag",
        "llm.model": "fast"}


@pytest.mark.parametrize("bad", ["alpha", "=3"])
def test_set_without_key_or_value_is_a_clear_error(bad):
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_set_options([bad])


def test_set_reaches_the_config_and_is_validated():
    parser = argparse.ArgumentParser()
    add_method_options(parser)
    config = config_from_args(parser.parse_args(["--set", "csrag.beta=5", "--set",
                                                 "csrag.enhance_context=false"]))
    assert config.csrag.beta == 5.0 and not config.csrag.enhance_context
    with pytest.raises(ConfigError, match="csrag.beta"):
        config_from_args(parser.parse_args(["--set", "csrag.beta=lots"]))

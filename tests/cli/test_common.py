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


def test_a_missing_extra_is_named_with_what_needs_it_and_nothing_is_imported(monkeypatch):
    import sys

    from faithrag.cli.common import require_extras
    from faithrag.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with pytest.raises(MissingExtraError, match=r"Running on Ray \(--ray\) needs the optional "
                       "extra 'ray'") as info:
        require_extras([("Running on Ray (--ray)", "ray")])
    assert info.value.hint == "pip install 'faithrag[ray]'"


@pytest.mark.parametrize("settings, location, extras", [
    ({}, None, []),
    ({"retrieval.mode": "dense"}, None, ["dense"]),
    ({"retrieval.mode": "hybrid", "retrieval.embedder": "st:some/model"}, None, ["st"]),
    ({}, "lancedb:/tmp/store", ["lancedb"]),
    ({}, "index", ["dense"]),  # an index directory's own mode, not the configuration's
])
def test_retrieval_needs_its_stores_and_embedders_extras(tmp_path, settings, location, extras):
    from faithrag.cli.common import retrieval_needs
    from faithrag.config import Config

    if location == "index":
        location = tmp_path / "index"
        location.mkdir()
        (location / "manifest.json").write_text('{"mode": "dense"}')
    config = Config.load(overrides=settings)
    assert [extra for _, extra in retrieval_needs(config, location)] == extras


@pytest.mark.parametrize("settings, extras", [
    ({}, ["llamacpp"]), ({"llm.backend": "fake"}, []), ({"llm.backend": "transformers"}, ["hf"]),
    ({"llm.backend": "openai"}, []), ({"llm.backend": "openai", "llm.tokenizer": "tiny"},
                                      ["llamacpp"]),
    ({"llm.backend": "openai", "llm.tokenizer": "tok/tokenizer.json"}, ["dense"]),
])
def test_a_model_needs_its_backends_extra_and_its_tokenizers(settings, extras):
    from faithrag.cli.common import model_needs
    from faithrag.config import Config

    assert [extra for _, extra in model_needs(Config.load(overrides=settings))] == extras

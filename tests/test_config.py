import pytest

from faithrag.config import Config
from faithrag.errors import ConfigError


def test_toml_then_overrides(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[llm]\nmodel = "fast"\nn_ctx = 2048\n[retrieval]\nk = 3\n')
    cfg = Config.load(path, {"llm.model": "tiny", "retrieval.k": None})
    assert cfg.llm.model == "tiny"  # CLI wins
    assert cfg.llm.n_ctx == 2048
    assert cfg.retrieval.k == 3  # None override leaves the file's value


@pytest.mark.parametrize("override", [{"llm.n_ctx": 10}, {"llm.backend": "nope"},
                                      {"retrieval.k": 0}, {"llm.unknown_key": 1}])
def test_bad_values_are_typed_errors_naming_the_key(override):
    with pytest.raises(ConfigError) as info:
        Config.load(None, override)
    key = next(iter(override)).split(".")[-1]
    assert key in str(info.value)


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError):
        Config.load(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm\n")
    with pytest.raises(ConfigError):
        Config.load(bad)


def test_the_api_key_is_left_out_of_the_configuration_repr():
    config = Config.validated({"llm": {"api_key": "sekrit"}})
    assert config.llm.api_key == "sekrit"
    assert "sekrit" not in repr(config) and "sekrit" not in str(config)


def _float_keys() -> list[str]:
    """Every float setting of every section, as section.key."""
    return [f"{name}.{key}" for name, section in Config.model_fields.items()
            if hasattr(section.annotation, "model_fields")
            for key, field in section.annotation.model_fields.items()
            if float in (field.annotation, *getattr(field.annotation, "__args__", ()))]


@pytest.mark.parametrize("key", _float_keys())
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_every_float_setting_refuses_non_finite_values(key, value):
    with pytest.raises(ConfigError, match="finite number"):
        Config.load(None, {key: value})
    section, leaf = key.split(".")
    with pytest.raises(ConfigError, match="finite number"):  # assignment, as from Python
        setattr(getattr(Config(), section), leaf, value)


@pytest.mark.parametrize("text", ["[csrag]\nalpha = nan\n", "[csrag]\nbeta = inf\n",
                                  "[csrag]\nalpha = 1e308\n", "[generation]\ntemperature = 1e9\n",
                                  "[server]\nheader_timeout = 1e308\n"])
def test_non_finite_and_unbounded_values_in_a_file_are_refused(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="Bad config value"):
        Config.load(path)


def test_the_csrag_biases_are_bounded_like_logit_bias():
    assert Config.load(None, {"csrag.alpha": -100, "csrag.beta": 100}).csrag.beta == 100
    for key in ("csrag.alpha", "csrag.beta"):
        with pytest.raises(ConfigError, match=key):
            Config.load(None, {key: 1e308})


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('[llm]\nmodel = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8") as info:
        Config.load(path)
    assert "UTF-8" in info.value.hint

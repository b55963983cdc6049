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

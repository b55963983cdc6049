"""Local tokenizers: a real tokenizer.json built with the `tokenizers` package, and the tiny
GGUF's vocabulary (marked `model`)."""

from __future__ import annotations

import sys

import pytest

from faithrag.errors import ConfigError
from faithrag.llm.base import user_prompt
from faithrag.llm.tokenizers import GGUFTokenizer, HFTokenizer, load_tokenizer


@pytest.fixture
def tokenizer_json(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"[UNK]": 0, "Paris": 1, "is": 2, "in": 3, "France": 4, "<|im_end|>": 5}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.add_special_tokens(["<|im_end|>"])
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def test_server_means_no_local_tokenizer():
    assert load_tokenizer("server") is None


@pytest.mark.parametrize("spec", ["nonsense", "missing/tokenizer.json"])
def test_an_unknown_tokenizer_is_a_config_error_naming_the_choices(spec):
    with pytest.raises(ConfigError, match=f"tokenizer '{spec}' is neither 'server', a preset"):
        load_tokenizer(spec)


def test_tokenizer_json_encodes_decodes_and_has_no_chat_template(tokenizer_json):
    tokenizer = load_tokenizer(str(tokenizer_json))
    assert isinstance(tokenizer, HFTokenizer) and tokenizer.name == str(tokenizer_json)
    assert tokenizer.vocab_size == 6
    assert tokenizer.encode("Paris is in Atlantis", special=False) == [1, 2, 3, 0]
    assert tokenizer.encode("France<|im_end|>", special=True) == [4, 5]
    assert tokenizer.decode([1, 2, 3, 4]) == "Paris is in France"
    assert tokenizer.render_chat(user_prompt("Paris")) is None


@pytest.mark.model
def test_gguf_vocabulary_round_trips_and_renders_the_chat_template(tiny_gguf):
    tokenizer = load_tokenizer(str(tiny_gguf))
    assert isinstance(tokenizer, GGUFTokenizer)
    ids = tokenizer.encode("Paris, 1889", special=False)
    assert ids and tokenizer.decode(ids) == "Paris, 1889"
    assert max(ids) < tokenizer.vocab_size
    # control-token markup is one token only when asked to parse it
    assert len(tokenizer.encode("<|im_end|>", special=True)) == 1
    assert len(tokenizer.encode("<|im_end|>", special=False)) > 1
    prompt = tokenizer.render_chat(user_prompt("Where is Paris?", system="Be brief."))
    assert "Where is Paris?" in prompt and "Be brief." in prompt
    assert prompt.index("Be brief.") < prompt.index("Where is Paris?")


@pytest.mark.parametrize("module, make, extra", [
    ("tokenizers", lambda path: HFTokenizer(path), "dense"),
    ("llama_cpp", lambda path: GGUFTokenizer(path), "llamacpp"),
])
def test_a_local_tokenizer_without_its_extra_names_it(monkeypatch, tmp_path, module, make, extra):
    from faithrag.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError) as err:
        make(tmp_path / "tok")
    assert err.value.hint == f"pip install 'faithrag[{extra}]'"

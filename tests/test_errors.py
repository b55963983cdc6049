from __future__ import annotations

import sys

import pytest

from faithrag.cli import main
from faithrag.errors import FaithragError, MissingExtraError, RuntimeUnavailableError
from faithrag.retrieval import embedder


def test_missing_extra_names_the_feature_and_the_exact_install_command():
    error = MissingExtraError("Dense retrieval", "dense", "Importing faiss failed.")
    assert isinstance(error, FaithragError) and isinstance(error, RuntimeUnavailableError)
    assert (error.feature, error.extra) == ("Dense retrieval", "dense")
    assert error.message == ("Dense retrieval needs the optional extra 'dense', which is not "
                             "installed. Importing faiss failed.")
    assert error.hint == "pip install 'faithrag[dense]'"
    assert str(error).splitlines()[1] == "  -> pip install 'faithrag[dense]'"


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "bridge.md").write_text("The Aldermoor Bridge opened in 1887.")
    return folder


@pytest.mark.parametrize("module, command, extra", [
    ("onnxruntime", ["index", "{docs}", "--out", "{tmp}/idx", "--mode", "dense"], "dense"),
    ("llama_cpp", ["ask", "When?", "--docs", "{docs}", "--model", "{tmp}/m.gguf"], "llamacpp"),
])
def test_a_missing_extra_reaches_the_cli_user_as_one_error(module, command, extra, docs,
                                                          tmp_path, monkeypatch, capsys):
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, module, None)  # makes `import <module>` fail
    monkeypatch.setattr(embedder, "_built", {})  # no embedder built earlier in this process
    rc = main([arg.format(docs=docs, tmp=tmp_path) for arg in command])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"needs the optional extra '{extra}'" in err
    assert f"pip install 'faithrag[{extra}]'" in err and "Traceback" not in err


def test_require_modules_names_the_extra_of_a_module_that_is_not_installed(monkeypatch):
    from faithrag.errors import require_modules

    require_modules("JSON", "core", ("json",))
    monkeypatch.setitem(sys.modules, "lancedb", None)  # its import would fail
    for modules in (("lancedb",), ("json", "no_such_module_at_all")):
        with pytest.raises(MissingExtraError, match="Storing needs the optional extra 'x'"):
            require_modules("Storing", "x", modules)

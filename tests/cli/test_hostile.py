"""`faithrag hostile run`: an extra the run needs is named before its run directory is written."""

import sys

import pytest

from faithrag.cli import main


@pytest.mark.parametrize("missing, settings, extra", [
    ("faiss", ["llm.backend=fake", "retrieval.mode=hybrid"], "dense"),  # its two indexes
    ("llama_cpp", [], "llamacpp"),
])
def test_a_missing_extra_is_reported_before_the_run_directory_is_written(
        tmp_path, monkeypatch, capsys, missing, settings, extra):
    monkeypatch.setitem(sys.modules, missing, None)  # as if it were not installed
    out = tmp_path / "run"
    sets = [arg for setting in settings for arg in ("--set", setting)]
    assert main(["hostile", "run", "--setting", "kre_musique", "--retrieval", "hostile",
                 "--out", str(out), "--data-dir", str(tmp_path / "data"), *sets]) == 2
    assert not out.exists()
    assert f"pip install 'faithrag[{extra}]'" in capsys.readouterr().err

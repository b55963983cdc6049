"""`faithrag index`: a document's identity does not depend on how its path was spelled."""

from __future__ import annotations

import json

import pytest

from faithrag.cli import main


def stored(idx) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in (idx / "passages.jsonl").read_text().splitlines()]
    return [(row["id"], row["text"]) for row in rows]


@pytest.fixture
def project(tmp_path, monkeypatch):
    for folder, name, text in (("base", "b.txt", "The old mill stands on the Wend."),
                               ("more", "n.txt", "The bridge over the Wend opened in 1887."),
                               ("more", "m.txt", "Walkers cross the bridge in spring.")):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_adding_a_file_again_however_spelled_does_not_store_it_twice(project, monkeypatch,
                                                                     capsys):
    assert main(["index", "base", "--out", "idx"]) == 0
    assert main(["index", "more", "--out", "idx", "--add"]) == 0
    assert main(["index", "more/n.txt", "--out", "idx", "--add"]) == 0
    monkeypatch.chdir(project / "more")
    assert main(["index", "n.txt", "--out", "../idx", "--add"]) == 0
    assert main(["index", str(project / "more" / "n.txt"), "--out", "../idx", "--add"]) == 0
    expected = [("base/b.txt#0", "The old mill stands on the Wend."),
                ("more/m.txt#0", "Walkers cross the bridge in spring."),
                ("more/n.txt#0", "The bridge over the Wend opened in 1887.")]
    assert stored(project / "idx") == expected
    assert "skipped 1 unchanged passages" in capsys.readouterr().out.splitlines()[-2]

    (project / "more" / "n.txt").write_text("The bridge over the Wend opened in 1888.")
    assert main(["index", "./n.txt", "--out", "../idx", "--add"]) == 0
    out = capsys.readouterr().out
    assert "added 1 passages" in out and "removed 1 old passages" in out
    assert stored(project / "idx") == expected[:2] + [
        ("more/n.txt#0", "The bridge over the Wend opened in 1888.")]


def test_adding_to_a_lancedb_store_skips_an_unchanged_file(project, capsys):
    pytest.importorskip("lancedb", reason="LanceDB is not installed (extra [lancedb])")
    assert main(["index", "more", "--out", "lancedb:db"]) == 0
    assert main(["index", str(project / "more" / "m.txt"), "--out", "lancedb:db", "--add"]) == 0
    assert "added 0 passages" in capsys.readouterr().out
    assert main(["ask", "When did the bridge open?", "--index", "lancedb:db", "--set",
                 "llm.backend=fake", "--json", "-k", "3"]) == 0
    ids = [p["id"] for p in json.loads(capsys.readouterr().out)["passages"]]
    assert sorted(ids) == ["more/m.txt#0", "more/n.txt#0"]


@pytest.mark.parametrize("missing, args, extra", [
    ("faiss", ["--mode", "dense"], "dense"),
    ("lancedb", ["--lance"], "lancedb"),
    ("llama_cpp", ["--paraphrase"], "llamacpp"),  # the model loads after the index is built
])
def test_a_missing_extra_is_reported_before_the_index_is_written(project, monkeypatch, capsys,
                                                                 missing, args, extra):
    import sys

    monkeypatch.setitem(sys.modules, missing, None)  # as if it were not installed
    out = project / "idx"
    target = f"lancedb:{out}" if "--lance" in args else str(out)
    assert main(["index", "base", "--out", target, *[a for a in args if a != "--lance"]]) == 2
    assert not out.exists()
    assert f"pip install 'faithrag[{extra}]'" in capsys.readouterr().err

from __future__ import annotations

import json

import pytest

from faithrag.errors import DataError
from faithrag.retrieval.loaders import MalformedDocumentError, load_documents


def write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n",
                    encoding="utf-8")


def test_folder_walk_reads_txt_md_jsonl_and_skips_others(tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.txt").write_text("Plain text.", encoding="utf-8")
    (corpus / "sub" / "b.md").write_text("# The Title\n\nBody text.", encoding="utf-8")
    write_jsonl(corpus / "c.jsonl", [{"id": "x1", "text": "First.", "title": "T1"},
                                     {"text": "Second, no id."}])
    (corpus / "ignored.csv").write_text("a,b", encoding="utf-8")
    (corpus / ".hidden").mkdir()
    (corpus / ".hidden" / "secret.txt").write_text("hidden", encoding="utf-8")

    docs = load_documents(corpus).documents

    assert [d.id for d in docs] == ["corpus/a.txt", "x1", "corpus/c.jsonl:2", "corpus/sub/b.md"]
    by_id = {d.id: d for d in docs}
    assert by_id["corpus/sub/b.md"].title == "The Title"
    assert by_id["x1"].title == "T1" and by_id["x1"].text == "First."
    assert by_id["corpus/a.txt"].source == "corpus/a.txt"
    assert by_id["x1"].source == "corpus/c.jsonl"


def test_configured_source_name_overrides_file_source(tmp_path):
    (tmp_path / "a.txt").write_text("Text.", encoding="utf-8")
    docs = load_documents(tmp_path / "a.txt", source="curated").documents
    assert [(d.id, d.source) for d in docs] == [("a.txt", "curated")]


@pytest.mark.parametrize("bad_line, reason", [
    ("{not json", "invalid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"title": "no text"}', '"text"'),
    ('{"text": 5}', '"text"'),
    ('{"text": "ok", "title": 3}', '"title"'),
])
def test_malformed_jsonl_line_raises_with_file_and_line(tmp_path, bad_line, reason):
    path = tmp_path / "d.jsonl"
    write_jsonl(path, [{"text": "good"}, "", bad_line])
    with pytest.raises(MalformedDocumentError) as err:
        load_documents(path)
    assert f"{path}:3" in err.value.message
    assert reason in err.value.message
    assert "load_documents(..., skip_malformed=True)" in err.value.hint


def test_malformed_jsonl_lines_skipped_and_counted_with_flag(tmp_path):
    path = tmp_path / "d.jsonl"
    write_jsonl(path, [{"text": "good one"}, "{broken", {"no": "text"}, {"text": "good two"}])
    result = load_documents(path, skip_malformed=True)
    assert [d.text for d in result.documents] == ["good one", "good two"]
    assert result.skipped_lines == 2
    assert len(result.warnings) == 2 and f"{path}:2" in result.warnings[0]


def test_missing_path_and_unsupported_file_are_data_errors(tmp_path):
    with pytest.raises(DataError):
        load_documents(tmp_path / "nope")
    (tmp_path / "x.pdf").write_bytes(b"%PDF")
    with pytest.raises(DataError):
        load_documents(tmp_path / "x.pdf")


def test_non_utf8_file_is_a_data_error(tmp_path):
    (tmp_path / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(DataError, match="UTF-8"):
        load_documents(tmp_path)


def test_duplicate_jsonl_ids_are_rejected(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [{"id": 1, "text": "a"}, {"id": "1", "text": "b"}])
    with pytest.raises(DataError, match="Duplicate"):
        load_documents(tmp_path)


def test_jsonl_strings_may_hold_unicode_line_separators(tmp_path):
    rows = [{"id": "a", "text": "first\u2028second"}, {"id": "b", "text": "x\x85y\u2029z"}]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    assert [d.text for d in load_documents(path).documents] == [r["text"] for r in rows]


@pytest.fixture
def project(tmp_path):
    """tmp/project/more/{n.txt, sub/x.md}"""
    more = tmp_path / "project" / "more"
    (more / "sub").mkdir(parents=True)
    (more / "n.txt").write_text("Note.", encoding="utf-8")
    (more / "sub" / "x.md").write_text("# X\n\nBody.", encoding="utf-8")
    return tmp_path / "project"


def test_ids_under_a_root_do_not_depend_on_how_the_path_is_spelled(project, monkeypatch):
    monkeypatch.chdir(project)
    spellings = ["more/n.txt", "./more/n.txt", "more/sub/../n.txt", str(project / "more/n.txt")]
    for spelling in spellings:
        docs = load_documents(spelling, root=project).documents
        assert [(d.id, d.meta["file"]) for d in docs] == [("more/n.txt", "more/n.txt")]
    monkeypatch.chdir(project / "more" / "sub")
    assert [d.id for d in load_documents("..", root=project).documents] == \
        ["more/n.txt", "more/sub/x.md"]
    assert [d.id for d in load_documents("x.md", root="../..").documents] == ["more/sub/x.md"]


def test_default_root_is_the_folder_holding_the_given_paths(project, monkeypatch):
    monkeypatch.chdir(project)
    assert [d.id for d in load_documents("more").documents] == ["more/n.txt", "more/sub/x.md"]
    assert [d.id for d in load_documents("./more/").documents] == ["more/n.txt", "more/sub/x.md"]
    assert [d.id for d in load_documents("more/n.txt").documents] == ["n.txt"]
    assert [d.id for d in load_documents(["more/n.txt", "more/sub/x.md"]).documents] == \
        ["n.txt", "sub/x.md"]


def test_a_file_reached_twice_is_read_once(project):
    docs = load_documents([project / "more", project / "more" / "n.txt"]).documents
    assert [d.id for d in docs] == ["more/n.txt", "more/sub/x.md"]


def test_a_file_outside_the_root_is_named_by_its_absolute_path(project, tmp_path):
    (tmp_path / "elsewhere.txt").write_text("Away.", encoding="utf-8")
    docs = load_documents(tmp_path / "elsewhere.txt", root=project).documents
    assert [d.id for d in docs] == [(tmp_path / "elsewhere.txt").resolve().as_posix()]


def test_jsonl_documents_name_their_file(project):
    write_jsonl(project / "more" / "rows.jsonl", [{"id": "r1", "text": "One."}, {"text": "Two."}])
    docs = load_documents(project / "more" / "rows.jsonl", root=project).documents
    assert [(d.id, d.meta["file"]) for d in docs] == [
        ("r1", "more/rows.jsonl"), ("more/rows.jsonl:2", "more/rows.jsonl")]

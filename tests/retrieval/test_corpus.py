import pytest

from faithrag import add_documents, index_documents
from faithrag.errors import ConfigError, EmptyIndexError
from faithrag.retrieval.index import IndexExistsError


def test_build_then_add_replaces_changed_and_skips_unchanged_documents(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Alpha is the first letter.")
    index = index_documents(docs, tmp_path / "idx")
    assert [p.id for p in index.passages] == ["docs/a.txt#0"]
    with pytest.raises(IndexExistsError):
        index_documents(docs, tmp_path / "idx")
    (docs / "b.txt").write_text("Beta is the second letter.")
    index, report = add_documents(docs / "b.txt", tmp_path / "idx")
    assert (report.added, report.unchanged) == (1, 0) and len(index) == 2
    index, report = add_documents(docs, tmp_path / "idx")
    assert (report.added, report.removed, report.unchanged) == (0, 0, 2)
    (docs / "a.txt").write_text("Alpha was rewritten.")
    index, report = add_documents(docs, tmp_path / "idx")
    assert (report.added, report.removed, report.unchanged) == (1, 1, 1)
    assert "Alpha was rewritten." in [p.text for p in index.passages]


def test_adding_with_another_mode_or_from_an_empty_folder_is_refused(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Alpha.")
    index_documents(tmp_path / "docs", tmp_path / "idx")
    with pytest.raises(ConfigError, match="is a bm25 index"):
        add_documents(tmp_path / "docs", tmp_path / "idx", mode="dense")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmptyIndexError):
        add_documents(tmp_path / "empty", tmp_path / "idx")

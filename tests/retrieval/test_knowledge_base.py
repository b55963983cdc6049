import pytest

from faithrag.errors import ConfigError, EmptyIndexError
from faithrag.retrieval import Index, InMemoryRetriever
from faithrag.retrieval.knowledge_base import open_knowledge_base
from faithrag.types import Passage


def test_a_folder_is_chunked_and_indexed_in_memory(tmp_path):
    words = " ".join(f"filler{i}" for i in range(60))
    (tmp_path / "fleming.md").write_text(f"# Penicillin\n\n{words} Alexander Fleming found it.")
    kb = open_knowledge_base(tmp_path, chunk_tokens=40, chunk_overlap=0)
    assert isinstance(kb, InMemoryRetriever) and len(kb) == 2
    assert "Fleming" in kb.retrieve("Alexander Fleming", 1)[0].text


def test_an_index_directory_is_loaded_as_it_is(tmp_path):
    Index.build([Passage("a", "Paris is the capital of France.")], tmp_path / "idx")
    kb = open_knowledge_base(tmp_path / "idx")
    assert isinstance(kb, Index) and kb.retrieve("capital of France", 1)[0].id == "a"


def test_missing_or_empty_knowledge_bases_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        open_knowledge_base(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmptyIndexError, match="holds no text"):
        open_knowledge_base(tmp_path / "empty")


def test_a_lancedb_store_is_opened_as_it_is(tmp_path, corpus_passages):
    pytest.importorskip("lancedb", reason="LanceDB is not installed (extra [lancedb])")
    from faithrag.retrieval.lance_store import LanceStore

    LanceStore.build(corpus_passages, str(tmp_path / "kb"), "bm25")
    kb = open_knowledge_base(f"lancedb:{tmp_path / 'kb'}")
    assert isinstance(kb, LanceStore)
    assert kb.retrieve("Apollo Moon", 1)[0].id == "docs/moon.txt#0"

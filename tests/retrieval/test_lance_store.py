from __future__ import annotations

import sys

import pytest

from faithrag.errors import ConfigError, DataError, EmptyIndexError, MissingExtraError
from faithrag.retrieval.chunking import ChunkSettings
from faithrag.retrieval.index import AddReport, Index, IndexExistsError
from faithrag.retrieval.lance_store import LanceStore
from faithrag.retrieval.locations import build_index, open_index
from faithrag.types import Passage

pytest.importorskip("lancedb", reason="LanceDB is not installed (extra [lancedb])")

QUESTION = "When did the bridge open?"


def test_build_search_reopen_round_trip(tmp_path, corpus_passages, hashing_embedder):
    store = build_index(corpus_passages, f"lancedb:{tmp_path / 'db'}", "hybrid",
                        embedder=hashing_embedder, chunking=ChunkSettings(250, 50))
    assert isinstance(store, LanceStore) and len(store) == 3
    before = store.search(QUESTION, 2)
    assert before[0].id == "docs/bridge.md#0" and before[0].score > 0
    assert before[0].meta["ranks"]["bm25"] == 1
    reopened = LanceStore.open(str(tmp_path / "db"), embedder=hashing_embedder)
    after = reopened.search(QUESTION, 2)
    assert [(p.id, p.score) for p in after] == [(p.id, p.score) for p in before]
    assert after[0].title == "Aldermoor Bridge" and after[0].source == "docs/bridge.md"
    assert reopened.manifest["chunking"] == ChunkSettings(250, 50).as_dict()
    stored = {p.id: p for p in reopened.passages}
    assert {pid: (p.text, p.meta) for pid, p in stored.items()} == \
        {p.id: (p.text, p.meta) for p in corpus_passages}


def test_dense_ranking_and_scores_match_the_in_memory_index(
        tmp_path, corpus_passages, hashing_embedder):
    index = Index.build(corpus_passages, tmp_path / "ix", "dense", embedder=hashing_embedder)
    store = LanceStore.build(corpus_passages, str(tmp_path / "db"), "dense",
                             embedder=hashing_embedder)
    for query in (QUESTION, "moon landing 1969", "chloroplasts"):
        expected, got = index.search(query, 3), store.search(query, 3)
        assert got[0].id == expected[0].id
        # passages tied at cosine 0 may come in either order
        assert {p.id: round(p.score, 5) for p in got} == \
            {p.id: round(p.score, 5) for p in expected}


def test_bm25_finds_by_words_and_misses_cleanly(tmp_path, corpus_passages):
    store = LanceStore.build(corpus_passages, str(tmp_path / "db"), "bm25")
    assert store.search("Apollo moon", 1)[0].id == "docs/moon.txt#0"
    assert store.search("zebra xylophone", 3) == []
    assert store.search("   ", 3) == [] and store.search(QUESTION, 0) == []
    assert store.search('what\'s "the bridge" (AND) : ?', 1)[0].id == "docs/bridge.md#0"


def test_added_passages_are_found_and_duplicates_refused(tmp_path, corpus_passages):
    store = LanceStore.build(corpus_passages[:1], str(tmp_path / "db"), "bm25")
    assert store.add(corpus_passages[1:]) == AddReport(2, 0, 0) and len(store) == 3
    reopened = open_index(f"lancedb:{tmp_path / 'db'}")
    assert reopened.search("Photosynthesis", 1)[0].id == "n1#0"
    with pytest.raises(DataError, match="Duplicate passage id 'n1#0'"):
        reopened.add([Passage("new", "fresh text"), Passage("n1#0", "again")])
    assert len(reopened) == 3  # nothing of the refused batch was written
    assert reopened.add([Passage("it's", "a quoted id")]) == AddReport(1, 0, 0)
    assert reopened.add([Passage("it's", "a new text")]) == AddReport(1, 1, 0)
    assert [p.text for p in reopened.passages if p.id == "it's"] == ["a new text"]


def test_adding_a_document_again_skips_it_unchanged_and_replaces_it_changed(tmp_path):
    def file(name, texts):
        return [Passage(f"{name}#{n}", text, "", name, None, {"file": name})
                for n, text in enumerate(texts)]

    uri = str(tmp_path / "db")
    LanceStore.build(file("a.txt", ["Alpha one.", "Alpha two."]) + file("b.txt", ["Beta."]),
                     uri, "bm25", root=tmp_path)
    store = open_index(f"lancedb:{uri}")
    assert store.root == tmp_path.resolve()
    assert store.add(file("a.txt", ["Alpha one.", "Alpha two."])) == AddReport(0, 0, 2)
    assert store.add(file("a.txt", ["Gamma."])) == AddReport(1, 2, 0)
    assert sorted((p.id, p.text) for p in store.passages) == [("a.txt#0", "Gamma."),
                                                               ("b.txt#0", "Beta.")]
    assert store.search("alpha", 3) == [] and store.search("gamma", 1)[0].id == "a.txt#0"


def test_existing_table_needs_overwrite(tmp_path, corpus_passages):
    LanceStore.build(corpus_passages, str(tmp_path / "db"), "bm25")
    with pytest.raises(IndexExistsError, match="already exists") as err:
        LanceStore.build(corpus_passages, str(tmp_path / "db"), "bm25")
    assert "overwrite=True" in err.value.hint and "LanceStore.open(uri).add" in err.value.hint
    replaced = LanceStore.build(corpus_passages[:1], str(tmp_path / "db"), "bm25",
                                overwrite=True)
    assert len(replaced) == 1


def test_missing_or_foreign_tables_and_other_embedders_are_refused(
        tmp_path, corpus_passages, hashing_embedder):
    with pytest.raises(EmptyIndexError, match="No table 'passages'"):
        LanceStore.open(str(tmp_path / "nothing"))
    import lancedb

    lancedb.connect(str(tmp_path / "foreign")).create_table("passages", data=[{"x": 1}])
    with pytest.raises(EmptyIndexError, match="not built by faithrag"):
        LanceStore.open(str(tmp_path / "foreign"))
    LanceStore.build(corpus_passages, str(tmp_path / "db"), "dense", embedder=hashing_embedder)
    with pytest.raises(ConfigError, match="hashing-v2"):
        LanceStore.open(str(tmp_path / "db"), embedder=type(hashing_embedder)("hashing-v2"))


def test_without_lancedb_the_error_says_what_to_install(tmp_path, corpus_passages, monkeypatch):
    monkeypatch.setitem(sys.modules, "lancedb", None)
    with pytest.raises(MissingExtraError) as err:
        LanceStore.build(corpus_passages, str(tmp_path / "db"), "bm25")
    assert err.value.hint == "pip install 'faithrag[lancedb]'"


def test_default_minilm_store_finds_a_paraphrase(tmp_path, minilm):
    passages = [Passage("a", "The committee postponed the vote until next spring."),
                Passage("b", "Heavy rainfall flooded several villages along the coast.")]
    LanceStore.build(passages, str(tmp_path / "db"), "dense", embedder=minilm)
    reopened = open_index(f"lancedb:{tmp_path / 'db'}")  # embedder rebuilt from its settings
    assert reopened.search("Storms caused flooding in seaside towns", 1)[0].id == "b"


def test_bm25_searches_titles_as_the_on_disk_index_does(tmp_path):
    passages = [Passage("a", "It was founded in 1850.", "Springfield"),
                Passage("b", "Another town, founded 1900.", "Shelbyville")]
    assert [p.id for p in Index.build(passages, tmp_path / "idx", "bm25").search(
        "Springfield", 2)] == ["a"]
    store = LanceStore.build(passages, str(tmp_path / "db"), "bm25")
    assert [p.id for p in store.search("Springfield", 2)] == ["a"]
    assert [p.text for p in store.search("Springfield", 2)] == ["It was founded in 1850."]

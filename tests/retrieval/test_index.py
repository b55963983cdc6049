from __future__ import annotations

import json

import pytest

from faithrag import __version__
from faithrag.errors import ConfigError, DataError, EmptyIndexError
from faithrag.retrieval.chunking import ChunkSettings
from faithrag.retrieval.index import AddReport, Index, IndexExistsError
from faithrag.types import Passage


def test_build_search_load_round_trip(tmp_path, corpus_passages, hashing_embedder):
    out = tmp_path / "ix"
    index = Index.build(corpus_passages, out, mode="hybrid", embedder=hashing_embedder,
                        chunking=ChunkSettings(250, 50))
    before = index.search("When did the bridge open?", 2)
    assert before[0].id == "docs/bridge.md#0" and before[0].score > 0
    loaded = Index.load(out, embedder=hashing_embedder)
    assert len(loaded) == 3 and loaded.mode == "hybrid"
    after = loaded.search("When did the bridge open?", 2)
    assert [(p.id, p.score) for p in after] == [(p.id, p.score) for p in before]
    assert after[0].title == "Aldermoor Bridge" and after[0].source == "docs/bridge.md"


def test_manifest_records_what_was_built(tmp_path, corpus_passages, hashing_embedder):
    out = tmp_path / "ix"
    Index.build(corpus_passages, out, mode="hybrid", embedder=hashing_embedder,
                chunking=ChunkSettings(200, 40))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["mode"] == "hybrid" and manifest["faithrag_version"] == __version__
    assert manifest["counts"] == {"passages": 3, "documents": 3,
                                  "sources": {"docs/bridge.md": 1, "docs/extra.jsonl": 1,
                                              "docs/moon.txt": 1}}
    assert manifest["chunking"] == {"max_tokens": 200, "overlap": 40, "counter": "words"}
    assert manifest["dense"] == {"embedder": "hashing", "identity": "hashing-v1", "dim": 64,
                                 "faiss_factory": "Flat"}
    assert manifest["bm25"]["k1"] == 1.5 and manifest["rrf_k"] == 60
    assert manifest["created"] == manifest["updated"]


def test_add_is_incremental_and_persisted(tmp_path, corpus_passages, hashing_embedder):
    out = tmp_path / "ix"
    index = Index.build(corpus_passages[:1], out, mode="hybrid", embedder=hashing_embedder)
    created = index.manifest["created"]
    assert index.add(corpus_passages[1:]) == AddReport(added=2, removed=0, unchanged=0)
    hashing_embedder.calls.clear()
    loaded = Index.load(out, embedder=hashing_embedder)
    assert len(loaded) == 3 and loaded.manifest["counts"]["passages"] == 3
    assert loaded.manifest["created"] == created
    assert loaded.search("Apollo Moon landing", 1)[0].id == "docs/moon.txt#0"
    assert hashing_embedder.calls == [["Apollo Moon landing"]]  # passages were not re-embedded


def _file(name: str, texts: list[str]) -> list[Passage]:
    """The passages chunk_documents makes of file `name`."""
    return [Passage(f"{name}#{n}", text, "", name, None, {"file": name, "doc_id": name})
            for n, text in enumerate(texts)]


def test_adding_a_document_again_skips_it_unchanged_and_replaces_it_changed(tmp_path):
    out = tmp_path / "ix"
    Index.build(_file("a.txt", ["Alpha one.", "Alpha two."]) + _file("b.txt", ["Beta."]), out)
    index = Index.load(out)
    files = {f: (out / f).read_bytes() for f in ("manifest.json", "passages.jsonl")}
    assert index.add(_file("a.txt", ["Alpha one.", "Alpha two."])) == AddReport(0, 0, 2)
    assert {f: (out / f).read_bytes() for f in files} == files  # nothing was rewritten
    assert [p.id for p in Index.load(out).passages] == ["a.txt#0", "a.txt#1", "b.txt#0"]

    # shorter and reworded: both old passages go, even the one whose id does not come back
    assert index.add(_file("a.txt", ["Gamma."]) + _file("c.txt", ["Delta."])) == \
        AddReport(added=2, removed=2, unchanged=0)
    loaded = Index.load(out)
    assert [(p.id, p.text) for p in loaded.passages] == [
        ("b.txt#0", "Beta."), ("a.txt#0", "Gamma."), ("c.txt#0", "Delta.")]
    assert loaded.search("alpha", 3) == [] and loaded.search("gamma", 1)[0].id == "a.txt#0"


def test_a_passage_may_not_take_the_id_of_another_documents_passage(tmp_path):
    Index.build(_file("a.txt", ["Alpha."]), tmp_path / "ix")
    index = Index.load(tmp_path / "ix")
    intruder = Passage("a.txt#0", "Other.", "", "b.txt", None, {"file": "b.txt"})
    with pytest.raises(DataError, match="Duplicate passage id 'a.txt#0'"):
        index.add([intruder])
    assert [p.text for p in Index.load(tmp_path / "ix").passages] == ["Alpha."]


def test_root_is_kept_and_an_index_built_without_one_still_loads(tmp_path):
    index = Index.build(_file("a.txt", ["Alpha."]), tmp_path / "ix", root=tmp_path)
    assert index.root == tmp_path.resolve() == Index.load(tmp_path / "ix").root
    manifest_path = tmp_path / "ix" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["root"]  # as written before the root was kept
    manifest_path.write_text(json.dumps(manifest))
    old = Index.load(tmp_path / "ix")
    assert old.root is None and old.search("alpha", 1)[0].id == "a.txt#0"
    # its passages have no "file": a document is matched by its id
    legacy = Passage("a.txt#0", "Alpha.", "", "a.txt", None, {"doc_id": "a.txt"})
    (tmp_path / "ix" / "passages.jsonl").write_text(json.dumps(
        {"id": legacy.id, "text": legacy.text, "title": "", "source": "a.txt",
         "meta": legacy.meta}) + "\n")
    assert Index.load(tmp_path / "ix").add(_file("a.txt", ["Alpha."])) == AddReport(0, 0, 1)


def test_empty_input_raises_empty_index_error(tmp_path):
    with pytest.raises(EmptyIndexError) as err:
        Index.build([], tmp_path / "ix")
    assert err.value.hint


def test_loading_missing_or_foreign_directory_is_clear(tmp_path):
    with pytest.raises(EmptyIndexError, match="does not exist"):
        Index.load(tmp_path / "nothing")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "passages.jsonl").write_text("")
    with pytest.raises(EmptyIndexError, match="manifest.json is missing") as err:
        Index.load(tmp_path / "foreign")
    assert "faithrag index" in err.value.hint


def test_existing_index_needs_overwrite(tmp_path, corpus_passages):
    Index.build(corpus_passages, tmp_path / "ix")
    with pytest.raises(IndexExistsError, match="already exists") as err:
        Index.build(corpus_passages, tmp_path / "ix")
    assert "overwrite=True" in err.value.hint and "Index.load(directory).add" in err.value.hint
    replaced = Index.build(corpus_passages[:1], tmp_path / "ix", overwrite=True)
    assert len(Index.load(tmp_path / "ix")) == len(replaced) == 1


def test_interrupted_update_is_detected(tmp_path, corpus_passages):
    out = tmp_path / "ix"
    Index.build(corpus_passages, out)
    with (out / "passages.jsonl").open("a") as f:
        f.write(json.dumps({"id": "half", "text": "written before a crash"}) + "\n")
    with pytest.raises(EmptyIndexError, match="inconsistent"):
        Index.load(out)


def _truncate(path):
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _not_utf8(path):
    path.write_bytes(path.read_bytes().replace(b"e", b"\xe9"))


@pytest.mark.parametrize("part, damage", [
    ("manifest.json", _truncate),
    ("manifest.json", lambda path: path.write_text('{"format": 1}')),
    ("manifest.json", lambda path: path.write_text("[1]")),
    ("passages.jsonl", _not_utf8),
    ("passages.jsonl", lambda path: path.unlink()),
    ("bm25", lambda path: __import__("shutil").rmtree(path)),
    *[(f"bm25/{name}", damage) for name in ("params.index.json", "vocab.index.json",
                                            "data.csc.index.npy", "indptr.csc.index.npy")
      for damage in (_truncate, lambda path: path.write_bytes(b""), lambda path: path.unlink())],
])
def test_a_damaged_index_is_an_empty_index_error_saying_how_to_rebuild_it(
        tmp_path, corpus_passages, part, damage):
    out = tmp_path / "ix"
    Index.build(corpus_passages, out)
    damage(out / part)
    with pytest.raises(EmptyIndexError) as err:
        Index.load(out)
    assert f"faithrag index PATHS --out {out} --overwrite" in err.value.hint
    assert "overwrite=True" in err.value.hint


def test_other_embedder_than_the_index_was_built_with_is_refused(
        tmp_path, corpus_passages, hashing_embedder):
    Index.build(corpus_passages, tmp_path / "ix", mode="dense", embedder=hashing_embedder)
    with pytest.raises(ConfigError, match="hashing-v1"):
        Index.load(tmp_path / "ix", embedder=type(hashing_embedder)(identity="hashing-v2"))


def test_default_dense_index_with_minilm_finds_a_paraphrase(tmp_path, minilm):
    passages = [
        Passage("a", "The committee postponed the vote until next spring."),
        Passage("b", "Heavy rainfall flooded several villages along the coast."),
        Passage("c", "The recipe needs two cups of flour and an egg."),
    ]
    index = Index.build(passages, tmp_path / "ix", mode="dense", embedder=minilm)
    assert index.search("Storms caused flooding in seaside towns", 1)[0].id == "b"
    reloaded = Index.load(tmp_path / "ix")  # embedder rebuilt from the manifest
    assert reloaded.search("The decision was delayed by the panel", 1)[0].id == "a"

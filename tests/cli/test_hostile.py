"""`faithrag hostile run`: an extra the run needs is named before its run directory is written;
the paraphrased attack is written by the run's model and kept for the next run; `--offset`
skips items."""

import json
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


def _paraphrased_run(data, out, *sets):
    return main(["hostile", "run", "--setting", "poisonedrag", "--retrieval", "hostile",
                 "--attack", "paraphrased", "--limit", "1", "--out", str(out), "--data-dir",
                 str(data), "--no-progress", *[a for s in sets for a in ("--set", s)]])


def test_the_paraphrased_attack_is_written_by_the_runs_model_and_kept(hostile_data, tmp_path,
                                                                     monkeypatch, capsys):
    monkeypatch.setenv("FAITHRAG_CACHE", str(tmp_path / "cache"))
    assert _paraphrased_run(hostile_data, tmp_path / "run", "llm.backend=fake") == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["sweep"]["attack"] == "paraphrased"
    assert len(list((tmp_path / "cache" / "attacks").rglob("*.json"))) == 5  # one per copy


@pytest.mark.model
def test_the_paraphrased_attack_runs_on_a_real_model(hostile_data, tmp_path, monkeypatch,
                                                     tiny_gguf):
    monkeypatch.setenv("FAITHRAG_CACHE", str(tmp_path / "cache"))
    sets = (f"llm.model={tiny_gguf}", "llm.n_threads=1")
    assert _paraphrased_run(hostile_data, tmp_path / "run", *sets) == 0
    written = {p: p.stat().st_mtime_ns for p in (tmp_path / "cache" / "attacks").rglob("*.json")}
    replies = [json.loads(p.read_text())["completions"][0] for p in written]
    assert len(written) == 5 and all(r["completion_tokens"] > 0 for r in replies)
    assert _paraphrased_run(hostile_data, tmp_path / "again", *sets) == 0
    assert {p: p.stat().st_mtime_ns for p in written} == written  # read back, not rewritten


def test_offset_runs_the_items_after_the_skipped_ones(hostile_data, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["hostile", "run", "--setting", "kre_musique", "--retrieval", "hostile",
                 "--offset", "1", "--limit", "1", "--out", str(out), "--data-dir",
                 str(hostile_data), "--no-progress", "--set", "llm.backend=fake"]) == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["kre_musique::q1"]
    assert json.loads(capsys.readouterr().out)["n"] == 1

"""The command line end to end: real retrieval, the tiny packaged model (embedded and behind a
real llama.cpp server), and user mistakes reported as one clear line, never a traceback."""

import json
import socket

import pytest

from faithrag.cli import main

DOC = ("The Aldermoor Bridge over the river Wend was opened in 1887. "
       "The county records show the opening ceremony in May 1887.")


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "bridge.md").write_text("# Aldermoor Bridge\n\n" + DOC)
    (folder / "other.txt").write_text("Walkers like the old mill on the far bank of the Wend.")
    return folder


@pytest.mark.model
@pytest.mark.server
def test_ask_with_explain_through_a_real_llama_cpp_server(llama_server, docs, capsys):
    rc = main(["ask", "When was the Aldermoor Bridge opened?", "--docs", str(docs), "--llm",
               "openai", "--base-url", llama_server, "--model", "tiny", "--n-ctx", "2048",
               "--explain", "--plain"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "bridge.md#0" in out  # the evidence it retrieved
    assert "generate/vanilla" in out and "1 LLM calls" in out
    assert out.strip().splitlines()[-1].startswith("Answer: ")


def test_index_into_lancedb_add_then_ask(docs, tmp_path, capsys):
    pytest.importorskip("lancedb", reason="LanceDB is not installed (extra [lancedb])")
    store = f"lancedb:{tmp_path / 'db'}"
    assert main(["index", str(docs / "other.txt"), "--out", store]) == 0
    assert main(["index", str(docs / "bridge.md"), "--out", store, "--add"]) == 0
    assert main(["index", str(docs / "bridge.md"), "--out", store, "--add"]) == 0  # unchanged
    assert "skipped 1 unchanged passages" in capsys.readouterr().out
    rc = main(["ask", "When was the Aldermoor Bridge opened?", "--index", store, "--set",
               "llm.backend=fake", "--json", "-k", "1"])
    result = json.loads(capsys.readouterr().out)
    assert rc == 0 and [p["id"] for p in result["passages"]] == ["bridge.md#0"]


@pytest.mark.model
@pytest.mark.usefixtures("tiny_gguf")  # skips when the tiny model is not assembled
def test_index_add_then_ask_embedded_json(docs, tmp_path, capsys):
    idx = tmp_path / "idx"
    assert main(["index", str(docs / "other.txt"), "--out", str(idx)]) == 0
    assert main(["index", str(docs / "bridge.md"), "--out", str(idx), "--add"]) == 0
    manifest = json.loads((idx / "manifest.json").read_text())
    assert manifest["counts"]["passages"] == 2 and manifest["chunking"]["max_tokens"] == 250
    capsys.readouterr()
    rc = main(["ask", "When was the Aldermoor Bridge opened?", "--index", str(idx), "--model",
               "tiny", "--threads", "1", "--json", "-k", "1", "--plain"])
    result = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [p["id"] for p in result["passages"]] == ["bridge.md#0"]
    steps = result["trace"]["steps"]
    assert [s["stage"] for s in steps] == ["retrieve", "generate"]
    assert steps[1]["llm_calls"][0]["prompt_tokens"] > 0
    assert isinstance(result["answer"], str)


def test_index_add_chunks_like_the_index_was_built(tmp_path, capsys):
    long = " ".join(f"Sentence number {i} talks about the river." for i in range(20))
    (tmp_path / "a.txt").write_text(long)
    (tmp_path / "b.txt").write_text(long)
    (tmp_path / "small.toml").write_text("[retrieval]\nchunk_tokens = 16\nchunk_overlap = 0\n")
    idx = tmp_path / "idx"
    assert main(["index", str(tmp_path / "a.txt"), "--out", str(idx), "--config",
                 str(tmp_path / "small.toml")]) == 0
    assert main(["index", str(tmp_path / "b.txt"), "--out", str(idx), "--add"]) == 0
    rows = [json.loads(line) for line in (idx / "passages.jsonl").read_text().splitlines()]
    added = [r["text"] for r in rows if r["id"].startswith("b.txt")]
    assert len(added) > 1 and all(len(text.split()) <= 16 for text in added)
    assert main(["index", str(tmp_path / "b.txt"), "--out", str(idx), "--add",
                 "--mode", "dense"]) == 2
    assert "is a bm25 index" in capsys.readouterr().err


def test_eval_without_data_is_a_user_error(tmp_path, capsys):
    assert main(["eval", "--method", "vanilla", "--out", str(tmp_path / "run")]) == 2
    assert "--dataset" in capsys.readouterr().err


@pytest.mark.model
@pytest.mark.usefixtures("tiny_gguf")
def test_demo_runs_a_case(capsys):
    assert main(["demo", "--model", "tiny", "--threads", "1", "--case", "1"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] case 1, passages disagree" in out
    assert "plain RAG (--plain) " in out and "faithrag, the defaults " in out
    assert "Right or shown with sources: plain RAG (--plain) " in out


def dead_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args, message", [
    (["--model", "/nowhere/model.gguf"], "neither a preset"),
    (["--n-ctx", "5"], "n_ctx"),
    (["--method", "nonsense"], "Unknown method"),
    (["--set", "csrag.alpha=nan"], "csrag.alpha': Input should be a finite number"),
    (["--set", "csrag.beta=inf"], "csrag.beta': Input should be a finite number"),
    (["--set", "csrag.alpha=1e308"], "csrag.alpha': Input should be less than or equal to 100"),
    (["--llm", "openai", "--base-url", f"http://127.0.0.1:{dead_port()}/v1", "--n-ctx", "512"],
     "did not answer"),
])
def test_user_mistakes_are_one_clear_error(args, message, docs, capsys):
    rc = main(["ask", "q?", "--docs", str(docs), *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and "Traceback" not in err


def test_empty_docs_and_missing_index(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["ask", "q?", "--docs", str(empty), "--set", "llm.backend=fake"]) == 2
    assert "No text found" in capsys.readouterr().err
    assert main(["ask", "q?", "--index", str(tmp_path / "none"), "--set", "llm.backend=fake"]) == 2
    assert "No index" in capsys.readouterr().err


def test_ask_without_evidence_refuses_unless_asked_for_the_models_memory(capsys, monkeypatch):
    import faithrag.llm

    def no_model(*args, **kwargs):
        raise AssertionError("the model must not load")
    monkeypatch.setattr(faithrag.llm, "load_llm", no_model)
    assert main(["ask", "Who built the bridge?", "--set", "llm.backend=fake"]) == 2
    err = capsys.readouterr().err
    assert "No evidence was given" in err and "--docs PATH or --index DIR" in err
    assert "--method closed_book" in err
    monkeypatch.undo()
    assert main(["ask", "Who built it?", "--method", "closed_book", "--set",
                 "llm.backend=fake"]) == 0


def test_a_missing_kb_is_named_before_the_model_loads(docs, capsys, monkeypatch, tmp_path):
    import faithrag.llm
    import faithrag.llm.models

    def no_model(*args, **kwargs):
        raise AssertionError("the model must not load")
    monkeypatch.setattr(faithrag.llm, "load_llm", no_model)
    monkeypatch.setattr(faithrag.llm.models, "resolve_model", no_model)
    assert main(["ask", "q?", "--docs", str(docs), "--verify", "antisyco", "--kb",
                 str(tmp_path / "typo")]) == 2
    err = capsys.readouterr().err
    assert "Trusted knowledge base not found" in err and "--kb" in err


def test_a_damaged_index_says_how_to_rebuild_it(docs, tmp_path, capsys):
    idx = tmp_path / "idx"
    assert main(["index", str(docs), "--out", str(idx)]) == 0
    (idx / "passages.jsonl").write_bytes(b"\xff\xfe not UTF-8\n")
    capsys.readouterr()
    assert main(["ask", "q?", "--index", str(idx), "--set", "llm.backend=fake"]) == 2
    err = capsys.readouterr().err
    assert "is missing or damaged" in err and f"faithrag index PATHS --out {idx} --overwrite" in err
    assert "Traceback" not in err


@pytest.mark.model
def test_index_paraphrase_fills_the_cache_that_online_csrag_reuses(docs, tmp_path, capsys,
                                                                     tiny_gguf, monkeypatch):
    monkeypatch.setenv("FAITHRAG_CACHE", str(tmp_path / "cache"))
    idx = tmp_path / "idx"
    model = ["--model", str(tiny_gguf), "--threads", "1"]
    assert main(["index", str(docs / "bridge.md"), "--out", str(idx), "--paraphrase",
                 *model]) == 0
    assert '"cached": 0' in capsys.readouterr().out
    assert len(list((tmp_path / "cache" / "csrag" / "paraphrases").rglob("*.json"))) == 1
    rc = main(["ask", "When was the Aldermoor Bridge opened?", "--index", str(idx), "-k", "1",
               "--method", "csrag", "--json", *model])
    steps = {s["stage"]: s for s in json.loads(capsys.readouterr().out)["trace"]["steps"]}
    assert rc == 0
    assert steps["paraphrase"]["outputs"]["cached"] == 1 and not steps["paraphrase"]["llm_calls"]
    assert [c["purpose"] for c in steps["facts"]["llm_calls"]] == ["facts"]


def test_an_abbreviated_flag_is_refused_not_read_as_another(capsys):
    import pytest

    from faithrag.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["hostile", "run", "--setting", "poisonedrag", "--retrieval",
                                   "hostile", "--out", "x", "--k", "6"])  # not --kb
    assert "unrecognized arguments: --k 6" in capsys.readouterr().err

import json

from faithrag import registry
from faithrag.cli import main
from faithrag.config import Config
from faithrag.eval.report import load_run
from faithrag.eval.run_bank import restore_runs, save_runs, strip_record
from faithrag.eval.runner import EvalSpec, run_eval
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline


def build(config, llm, retriever):
    return Pipeline(registry.build("generator", config.pipeline.method, llm, config, retriever), retriever)


def write_set(path, n):
    path.write_text("".join(json.dumps({
        "id": f"t::{i}", "question": f"Where is item {i}?", "context": f"Item {i} is in Sydney.",
        "answer": "Sydney", "answers": ["Sydney"]}) + "\n" for i in range(n)))
    return path


def run(data, out, limit, llm):
    config = Config.load(None, {"llm.backend": "fake"})
    return run_eval(EvalSpec("set", file=str(data), limit=limit), config, out, llm, build,
                    progress=False)


def test_banked_run_drops_data_fields_and_resumes_where_it_stopped(tmp_path):
    data = write_set(tmp_path / "set.jsonl", 6)
    run(data, tmp_path / "runs/a", 4, FakeLLM(default="Sydney"))
    with open(tmp_path / "runs/a/results.jsonl", "a") as f:
        f.write('{"id": "t::9", "pred')  # a line cut by a crash

    assert save_runs(tmp_path / "runs", tmp_path / "bank") == 1
    banked = [json.loads(x) for x in (tmp_path / "bank/a/results.jsonl").read_text().splitlines()]
    assert len(banked) == 4
    assert all("gold" not in r and "choices" not in r for r in banked)
    assert load_run(tmp_path / "bank/a").manifest["dataset"] == "set"

    assert restore_runs(tmp_path / "bank", tmp_path / "fresh") == 1
    llm = FakeLLM(default="Sydney")
    summary = run(data, tmp_path / "fresh/a", 6, llm)
    assert summary["n"] == 6 and summary["correct"] == 6
    assert len(llm.calls) == 2  # only the two items the bank did not hold


def test_restore_keeps_a_run_that_holds_more(tmp_path):
    data = write_set(tmp_path / "set.jsonl", 5)
    run(data, tmp_path / "runs/a", 2, FakeLLM(default="Sydney"))
    save_runs(tmp_path / "runs", tmp_path / "bank")
    run(data, tmp_path / "runs/a", 5, FakeLLM(default="Sydney"))
    restore_runs(tmp_path / "bank", tmp_path / "runs")
    assert len((tmp_path / "runs/a/results.jsonl").read_text().splitlines()) == 5


def test_strip_record_refuses_partial_lines():
    assert strip_record('{"id": "x", "gold": ["a"], "choices": ["a", "b"]}') == \
        '{"id": "x"}'
    assert strip_record('{"id": "x", "pre') is None
    assert strip_record('["not", "a", "record"]') is None


def test_option_texts_keying_probabilities_are_dropped_and_the_order_kept():
    line = json.dumps({"id": "x", "choices": ["Sydney", "Canberra"], "gold_index": 1,
                       "extra": {"choice_probabilities": {"Sydney": 0.2, "Canberra": 0.8}}})
    record = json.loads(strip_record(line))
    assert record["extra"]["choice_probabilities"] == [0.2, 0.8]
    assert "Sydney" not in json.dumps(record) and record["gold_index"] == 1


def test_restored_hostile_run_resumes_in_another_folder(hostile_data, tmp_path):
    from faithrag import registry
    from faithrag.eval.hostile_runner import run_hostile
    from faithrag.eval.hostile_settings import build_setting

    def build_verified(config, llm, retriever):
        return Pipeline(registry.build("generator", config.pipeline.method, llm, config, retriever),
                        retriever, verifier=registry.build("verifier", "antisyco", llm, config, retriever),
                        k=config.retrieval.k)

    setting = build_setting("kre_musique", str(hostile_data))
    config = Config.load(None, {"llm.backend": "fake", "pipeline.verify": "antisyco"})
    run_hostile(setting, "hostile", config, tmp_path / "old/run", FakeLLM(default="x"),
                build_verified, limit=1, progress=False)
    save_runs(tmp_path / "old", tmp_path / "bank")
    restore_runs(tmp_path / "bank", tmp_path / "new")
    llm = FakeLLM(default="x")
    summary = run_hostile(setting, "hostile", config, tmp_path / "new/run", llm, build_verified,
                          limit=2, progress=False)
    assert summary["n"] == 2
    assert sum(call.purpose == "answer" for call in llm.calls) == 1  # only the new item ran
    manifest = json.loads((tmp_path / "new/run/manifest.json").read_text())
    assert manifest["config"]["antisyco"]["kb"] == str((tmp_path / "new/run/trusted_kb").resolve())


def test_cli_saves_and_restores_and_refuses_a_folder_without_runs(tmp_path, capsys):
    run(write_set(tmp_path / "set.jsonl", 2), tmp_path / "runs/a", 2, FakeLLM(default="Sydney"))
    assert main(["runs", "save", str(tmp_path / "runs"), "--to", str(tmp_path / "bank")]) == 0
    assert "saved 1 run(s)" in capsys.readouterr().out
    assert main(["runs", "restore", str(tmp_path / "bank"), "--to", str(tmp_path / "new")]) == 0
    assert load_run(tmp_path / "new/a").manifest["dataset"] == "set"
    assert main(["runs", "save", str(tmp_path / "set.jsonl"), "--to", str(tmp_path / "x")]) == 2
    assert "no run directory under" in capsys.readouterr().err

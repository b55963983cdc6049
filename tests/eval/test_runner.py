import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.datasets import Dataset, QAItem
from faithrag.eval.run_dir import ResultsFile
from faithrag.eval.runner import EvalSpec, QAItemEvaluator, run_eval
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline
from faithrag.types import Answer


def build(config, llm, retriever):
    return Pipeline(registry.build("generator", config.pipeline.method, llm, config, retriever), retriever)


def write_set(path, n=12):
    with open(path, "w") as f:
        f.writelines(json.dumps({
                "id": f"t::{i}", "question": f"Where is item {i}?",
                "context": f"Item {i} is in Sydney.", "answer": "Sydney",
                "answers": ["Sydney"], "parametric_answer": "Canberra"}) + "\n" for i in range(n))
        f.write('{"id": "broken", "question": \n')  # malformed line: reported, skipped
    return path


def edit_manifest(run, edit):
    """Change a run's manifest.json in place, as an older version of the code would have
    written it."""
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def test_free_form_run_records_metrics_and_skips_malformed_lines(tmp_path):
    data = write_set(tmp_path / "set.jsonl")
    llm = FakeLLM([("item 3", "Canberra")], default="Sydney")
    config = Config.load(None, {"llm.backend": "fake"})
    summary = run_eval(EvalSpec("set", file=str(data)), config, tmp_path / "run", llm, build,
                       progress=False)
    assert summary["n"] == 12 and summary["correct"] == 11
    records = [json.loads(x) for x in (tmp_path / "run/results.jsonl").read_text().splitlines()]
    wrong = next(r for r in records if r["id"] == "t::3")
    assert wrong["metrics"]["parametric"] == 1 and wrong["correct"] is False
    manifest = json.loads((tmp_path / "run/manifest.json").read_text())
    assert manifest["dataset_sha256"] and manifest["method"] == "vanilla"
    assert len(manifest["malformed_lines"]) == 1 and ":13:" in manifest["malformed_lines"][0]


def test_choice_method_gets_two_way_choices_and_errors_are_recorded(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=4)

    def respond(request):
        if "item 2" in request.messages[-1].content:
            raise RuntimeError("backend fell over")
        return '{"Reason": "context", "Answer": "sydney"}'

    config = Config.load(None, {"llm.backend": "fake", "pipeline.method": "cot_json"})
    summary = run_eval(EvalSpec("set", method="cot_json", file=str(data)), config,
                       tmp_path / "run", FakeLLM(respond), build, progress=False)
    assert summary["failed_items"] == 1 and summary["correct"] == 3
    records = {r["id"]: r for r in ResultsFile(tmp_path / "run/results.jsonl").records}
    assert "backend fell over" in records["t::2"]["error"]
    assert sorted(records["t::0"]["choices"]) == ["canberra", "sydney"]


def test_rerun_with_other_settings_is_refused(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=2)
    config = Config.load(None, {"llm.backend": "fake"})
    run_eval(EvalSpec("set", file=str(data)), config, tmp_path / "run", FakeLLM(), build,
             progress=False)
    with pytest.raises(ConfigError, match="seed: 0 → 7"):
        run_eval(EvalSpec("set", file=str(data), seed=7), config, tmp_path / "run", FakeLLM(),
                 build, progress=False)
    other = Config.load(None, {"llm.backend": "fake", "generation.answer_tokens": 7})
    with pytest.raises(ConfigError, match=r"config\.generation\.answer_tokens: \d+ → 7"):
        run_eval(EvalSpec("set", file=str(data)), other, tmp_path / "run", FakeLLM(), build,
                 progress=False)


def test_items_that_errored_are_retried_on_resume_and_counted_once(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=3)
    config = Config.load(None, {"llm.backend": "fake"})

    def server_down_for_item_1(request):
        if "item 1" in request.messages[-1].content:
            raise ConnectionError("server unreachable")
        return "Sydney"

    first = run_eval(EvalSpec("set", file=str(data)), config, tmp_path / "run",
                     FakeLLM(server_down_for_item_1), build, progress=False)
    assert (first["failed_items"], first["correct"]) == (1, 2)
    llm = FakeLLM(default="Sydney")
    second = run_eval(EvalSpec("set", file=str(data)), config, tmp_path / "run", llm, build,
                      progress=False)
    assert (second["n"], second["failed_items"], second["correct"]) == (3, 0, 3)
    assert len(llm.calls) == 1  # only the failed item ran again
    assert len(ResultsFile(tmp_path / "run/results.jsonl").records) == 3


def test_offset_skips_items_and_a_run_resumes_only_with_the_same_offset(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=6)
    config = Config.load(None, {"llm.backend": "fake"})
    run_eval(EvalSpec("set", file=str(data), limit=2, offset=3), config, tmp_path / "run",
             FakeLLM(default="Sydney"), build, progress=False)
    records = ResultsFile(tmp_path / "run/results.jsonl").records
    assert [r["id"] for r in records] == ["t::3", "t::4"]
    assert json.loads((tmp_path / "run/manifest.json").read_text())["offset"] == 3
    with pytest.raises(ConfigError, match="offset"):
        run_eval(EvalSpec("set", file=str(data), limit=2), config, tmp_path / "run", FakeLLM(),
                 build, progress=False)
    # without a limit, the rest of the set from the offset on
    summary = run_eval(EvalSpec("set", file=str(data), offset=3), config, tmp_path / "run",
                       FakeLLM(default="Sydney"), build, progress=False)
    assert summary["n"] == 3


def test_a_run_from_before_offset_resumes_as_offset_zero(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=3)
    config = Config.load(None, {"llm.backend": "fake"})
    run_eval(EvalSpec("set", file=str(data), limit=1), config, tmp_path / "run", FakeLLM(), build,
             progress=False)
    edit_manifest(tmp_path / "run", lambda m: m.pop("offset"))  # as written by older code
    summary = run_eval(EvalSpec("set", file=str(data)), config, tmp_path / "run", FakeLLM(),
                       build, progress=False)
    assert summary["n"] == 3


@pytest.mark.parametrize("offset, limit, message", [(-1, None, "must be >= 0"),
                                                    (12, 1, "skips every item")])
def test_an_offset_out_of_range_is_a_clear_error(tmp_path, offset, limit, message):
    data = write_set(tmp_path / "set.jsonl")
    with pytest.raises(ConfigError, match=message):
        run_eval(EvalSpec("set", file=str(data), limit=limit, offset=offset),
                 Config.load(None, {"llm.backend": "fake"}), tmp_path / "run", FakeLLM(), build,
                 progress=False)
    assert not (tmp_path / "run/manifest.json").exists()  # refused before anything is written


def test_code_versions_of_a_resumed_run_are_kept(tmp_path, monkeypatch):
    from faithrag.eval import runner

    data = write_set(tmp_path / "set.jsonl", n=2)
    config = Config.load(None, {"llm.backend": "fake"})
    for version, limit in (("0.1+gaaa", 1), ("0.1+gaaa", 1), ("0.1+gbbb", 2)):
        monkeypatch.setattr(runner, "code_version", lambda v=version: v)
        run_eval(EvalSpec("set", file=str(data), limit=limit), config, tmp_path / "run",
                 FakeLLM(), build, progress=False)
    manifest = json.loads((tmp_path / "run/manifest.json").read_text())
    assert manifest["code_versions"] == ["0.1+gaaa", "0.1+gbbb"]
    assert manifest["code_version"] == "0.1+gbbb"


def test_a_run_resumed_on_another_machine_records_both(tmp_path, monkeypatch):
    from faithrag.eval import runner

    data = write_set(tmp_path / "set.jsonl", n=3)
    config = Config.load(None, {"llm.backend": "fake"})
    for machine, limit in (("cpu A; AVX2", 1), ("cpu B; AVX512", 2), ("cpu B; AVX512", 3)):
        monkeypatch.setattr(runner, "platform_identity", lambda m=machine: m)
        run_eval(EvalSpec("set", file=str(data), limit=limit), config, tmp_path / "run",
                 FakeLLM(), build, progress=False)
    manifest = json.loads((tmp_path / "run/manifest.json").read_text())
    assert manifest["platforms"] == ["cpu A; AVX2", "cpu B; AVX512"]
    assert manifest["platform"] == "cpu B; AVX512"


def test_unparsed_output_scores_zero_on_every_metric(tmp_path):
    class Unreadable:  # a free-form generator whose output could not be read
        name = "unreadable"

        def generate(self, question, passages, trace):
            return Answer(text="Sydney or Canberra", parse_status="failed")

    data = write_set(tmp_path / "set.jsonl", n=1)
    run_eval(EvalSpec("set", file=str(data)), Config.load(None, {"llm.backend": "fake"}),
             tmp_path / "run", FakeLLM(), lambda config, llm, retriever: Pipeline(Unreadable()),
             progress=False)
    record = ResultsFile(tmp_path / "run/results.jsonl").records[0]
    assert record["parse_status"] == "failed" and record["correct"] is False
    assert record["metrics"] and not any(record["metrics"].values())


def test_resume_with_other_thread_count_is_allowed(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=3)
    config = Config.load(None, {"llm.backend": "fake"})
    run_eval(EvalSpec("set", file=str(data), limit=2), config, tmp_path / "run", FakeLLM(), build,
             progress=False)
    faster = Config.load(None, {"llm.backend": "fake", "llm.n_threads": 1})
    summary = run_eval(EvalSpec("set", file=str(data)), faster, tmp_path / "run", FakeLLM(),
                       build, progress=False)
    assert summary["n"] == 3


def test_resume_after_code_added_a_setting_is_allowed(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=3)
    config = Config.load(None, {"llm.backend": "fake"})
    run_eval(EvalSpec("set", file=str(data), limit=2), config, tmp_path / "run", FakeLLM(), build,
             progress=False)
    # as written by older code
    edit_manifest(tmp_path / "run", lambda m: m["config"]["generation"].pop("answer_tokens"))
    summary = run_eval(EvalSpec("set", file=str(data)), config, tmp_path / "run", FakeLLM(),
                       build, progress=False)
    assert summary["n"] == 3
    changed = Config.load(None, {"llm.backend": "fake", "generation.max_tokens": 9})
    with pytest.raises(ConfigError):
        run_eval(EvalSpec("set", file=str(data)), changed, tmp_path / "run", FakeLLM(), build,
                 progress=False)
    # the added setting had its default in the old run: any other value is a change
    not_default = Config.load(None, {"llm.backend": "fake", "generation.answer_tokens": 7})
    assert not_default.generation.answer_tokens != Config().generation.answer_tokens
    with pytest.raises(ConfigError, match="config"):
        run_eval(EvalSpec("set", file=str(data)), not_default, tmp_path / "run", FakeLLM(),
                 build, progress=False)


def test_a_run_directory_in_use_is_refused(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=1)
    config = Config.load(None, {"llm.backend": "fake"})
    (tmp_path / "run").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        "h = open(sys.argv[1], 'a'); fcntl.flock(h, fcntl.LOCK_EX); print('held', flush=True)\n"
        "time.sleep(60)"), str(tmp_path / "run/.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match="Another process"):
            run_eval(EvalSpec("set", file=str(data)), config, tmp_path / "run", FakeLLM(), build,
                     progress=False)
    finally:
        holder.kill()
        holder.wait()
    summary = run_eval(EvalSpec("set", file=str(data)), config, tmp_path / "run", FakeLLM(),
                       build, progress=False)  # a dead holder leaves no stale lock
    assert summary["n"] == 1


SLOW_RUN = textwrap.dedent("""
    import sys, time
    from faithrag.config import Config
    from faithrag.eval.runner import EvalSpec, run_eval
    from faithrag.llm.fake import FakeLLM
    from faithrag.methods.vanilla import VanillaRAG
    from faithrag.pipeline import Pipeline

    def slow(request):
        time.sleep(0.05)
        return "Sydney"

    config = Config.load(None, {"llm.backend": "fake"})
    run_eval(EvalSpec("set", file=sys.argv[1]), config, sys.argv[2], FakeLLM(slow),
             lambda c, llm, r: Pipeline(VanillaRAG(llm)), progress=False)
""")


def test_kill_9_mid_run_then_resume_loses_nothing_and_duplicates_nothing(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=60)
    out = tmp_path / "run"
    script = tmp_path / "slow_run.py"
    script.write_text(SLOW_RUN)
    proc = subprocess.Popen([sys.executable, str(script), str(data), str(out)])
    results = out / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if results.exists() and results.read_text().count("\n") >= 10:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = results.read_bytes()
    finished_before = before.count(b"\n")
    assert 10 <= finished_before < 60, "the run must be killed mid-way"

    subprocess.run([sys.executable, str(script), str(data), str(out)], check=True, timeout=120)
    after = results.read_bytes()
    assert after.startswith(before[: before.rfind(b"\n") + 1])  # nothing finished was lost
    ids = [json.loads(line)["id"] for line in after.splitlines()]
    assert len(ids) == len(set(ids)) == 60
    assert json.loads((out / "manifest.json").read_text())["resumed"] == 1


def test_golden_mode_asks_the_non_conflicting_version(tmp_path):
    data = tmp_path / "kre.jsonl"
    with open(data, "w") as f:
        f.writelines(json.dumps({
            "id": f"k::{i}", "question": "Capital?", "context": "The capital is Sydney.",
            "answer": "Sydney", "answers": ["Sydney"], "choices": ["Sydney", "Canberra"],
            "answer_idx": 0, "parametric_answer": "Canberra",
            "meta": {"golden_context": "The capital is Canberra.",
                     "golden_answer": "Canberra"} if i < 2 else {}}) + "\n" for i in range(3))
    llm = FakeLLM([("Canberra.", "Canberra")], default="Sydney")
    config = Config.load(None, {"llm.backend": "fake"})
    summary = run_eval(EvalSpec("kre", file=str(data), context_mode="golden"), config,
                       tmp_path / "run", llm, build, progress=False)
    assert summary["correct"] == 2
    records = {r["id"]: r for r in ResultsFile(tmp_path / "run/results.jsonl").records}
    assert records["k::0"]["gold"] == ["Canberra"] and records["k::0"]["correct"]
    assert records["k::2"]["parse_status"] == "skipped"
    assert "The capital is Canberra." in llm.calls[0].messages[-1].content


def test_an_item_that_breaks_scoring_is_recorded_and_the_run_goes_on(tmp_path):
    data = write_set(tmp_path / "set.jsonl", n=3)
    lines = data.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["meta"] = {"target_incorrect_answer": 5}  # not a string nor a list of them
    data.write_text("\n".join([lines[0], json.dumps(bad), lines[2]]) + "\n")
    summary = run_eval(EvalSpec("set", file=str(data)), Config.load(None, {"llm.backend": "fake"}),
                       tmp_path / "run", FakeLLM(default="Sydney"), build, progress=False)
    records = {r["id"]: r for r in ResultsFile(tmp_path / "run/results.jsonl").records}
    assert (summary["n"], summary["failed_items"]) == (3, 1)
    assert records["t::1"]["parse_status"] == "error" and "TypeError" in records["t::1"]["error"]


def test_an_error_in_a_late_stage_keeps_the_steps_that_ran(tmp_path):
    class BrokenVerifier:
        def verify(self, question, passages, answer, trace):
            with trace.step("verify", "broken"):
                raise OSError("trusted index unreadable")

    def build(config, llm, retriever):
        return Pipeline(registry.build("generator", "vanilla", llm, config, retriever), retriever,
                        verifier=BrokenVerifier())

    item = QAItem(id="x", source="t", question="Who discovered penicillin?",
                  context="Penicillin was discovered by Alexander Fleming.",
                  answer="Alexander Fleming", answers=["Alexander Fleming"])
    dataset = Dataset(name="t", path=tmp_path, split="dev", kind="qa", sha256="0", items=[item])
    llm = FakeLLM(default="Alexander Fleming")
    record = QAItemEvaluator(EvalSpec("t"), Config(), dataset, build, llm)(item)
    assert record["parse_status"] == "error" and "trusted index unreadable" in record["error"]
    assert [s["name"] for s in record["trace"]["stages"]] == ["vanilla", "broken"]
    assert record["prompt_tokens"] > 0  # the draft's call is accounted

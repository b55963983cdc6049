"""The verifier-cost benchmark: its run (on the scripted fake LLM: control flow only) resumes and
records both variants on the same draft; its summary's arithmetic."""

import json

import bench_verifier_cost as bench
import pytest

from faithrag.errors import ConfigError
from faithrag.eval.datasets import ContextDoc, Dataset, QAItem
from faithrag.eval.hostile_settings import HostileSetting
from faithrag.llm.fake import FakeLLM
from faithrag.types import Passage


def setting(n):
    items = [QAItem(id=f"q{i}", source="toy", question="Who discovered penicillin?",
                    context=[ContextDoc("Penicillin was discovered by Alexander Fleming.")],
                    answer="Alexander Fleming", answers=["Alexander Fleming"],
                    meta={"target_incorrect_answer": ["Louis Pasteur"]}) for i in range(n)]
    dataset = Dataset("toy", None, "dev", "qa", "", items)
    poison = {"Who discovered penicillin?": [
        Passage("p", "Penicillin was discovered by Louis Pasteur.", "History", "context")]}
    return HostileSetting("toy", dataset, poison, [], k=2)


REPLIES = {"answer": "Louis Pasteur", "relevance": "RELEVANCE: RELEVANT\nSCORE: 0.9",
           "support": "SUPPORT: SUPPORTED", "claims": "- Louis Pasteur discovered penicillin.",
           "contradiction": "ANSWER: Alexander Fleming", "repair": "Alexander Fleming"}


def test_run_verifies_one_draft_with_both_variants_and_resumes(tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "fleming.md").write_text("Penicillin was discovered in 1928 by "
                                                "Alexander Fleming.")
    llm = FakeLLM(lambda request: REPLIES[request.purpose])
    run = {"llm": llm, "retrieval": "hostile", "kb": lambda config: str(tmp_path / "kb"),
           "out": tmp_path, "k": 2, "progress": lambda line: None, "antisyco__judge_tokens": 64}
    bench.run(setting=setting(3), limit=2, **run)
    records = bench.read_records(tmp_path / "records.jsonl")
    assert [r["item"] for r in records] == ["q0", "q1"]
    assert [r["order"] for r in records] == [["before", "after"], ["after", "before"]]
    assert not {"gold", "targets"} & set(records[0])  # no copy of the benchmark's data
    for record in records:
        assert record["draft"]["answer"] == "Louis Pasteur" and record["draft"]["attack"]
        for variant in bench.VARIANTS:
            v = record[variant]
            assert (v["decision"], v["answer"], v["correct"], v["attack"]) == (
                "REPAIR", "Alexander Fleming", True, False)
            assert v["verdicts"] == ["CONTRADICTED"]
            assert set(v["phases"]) == set(bench.PHASES)
            assert v["seconds"] == pytest.approx(record["draft"]["seconds"]
                                                 + v["verify_seconds"], abs=2e-3)
        # the former behaviour extracts claims; the short draft is its own claim after
        assert record["before"]["phases"]["antisyco/claims"]["llm_calls"] == 1
        assert record["after"]["phases"]["antisyco/claims"]["llm_calls"] == 0
        # and asks every judgement; a contradicted claim needs no reflection after
        assert record["before"]["phases"]["antisyco/reflect"]["llm_calls"] == 2
        assert record["after"]["phases"]["antisyco/reflect"]["llm_calls"] == 0
    bench.run(setting=setting(3), limit=3, **run)  # resumes: only the third item is added
    assert [r["item"] for r in bench.read_records(tmp_path / "records.jsonl")] == [
        "q0", "q1", "q2"]


def test_run_compares_the_defaults_with_a_change_and_keeps_the_variants(tmp_path):
    (tmp_path / "kb").mkdir()
    for name, text in [("fleming", "Penicillin was discovered in 1928 by Alexander Fleming."),
                       ("mould", "Penicillin comes from a mould; Fleming saw it kill bacteria.")]:
        (tmp_path / "kb" / f"{name}.md").write_text(text)
    passages_read = []  # by each contradiction check, in order

    def reply(request):
        if request.purpose == "contradiction":
            shown = request.messages[-1].content.split("Reference passages:")[1]
            passages_read.append(shown.count("Penicillin"))
        return REPLIES[request.purpose]

    run = {"llm": FakeLLM(reply), "retrieval": "hostile", "kb": lambda config: str(tmp_path / "kb"),
           "out": tmp_path, "k": 2, "progress": lambda line: None, "before": {},
           "after": {"antisyco__kb_k": 1}, "antisyco__judge_tokens": 64}
    bench.run(setting=setting(1), limit=1, **run)
    record = bench.read_records(tmp_path / "records.jsonl")[0]
    assert record["order"] == ["before", "after"]
    assert passages_read == [2, 1]
    # the defaults on both sides of the change: a short draft is its own claim in each
    assert record["before"]["phases"]["antisyco/claims"]["llm_calls"] == 0
    assert record["after"]["phases"]["antisyco/claims"]["llm_calls"] == 0
    assert json.loads((tmp_path / "variants.json").read_text()) == {
        "before": {}, "after": {"antisyco__kb_k": 1}}
    with pytest.raises(ConfigError, match="other variants") as refused:
        bench.run(setting=setting(2), limit=2, **{**run, "after": {"antisyco__kb_k": 3}})
    assert "--after-set" in refused.value.hint
    assert len(bench.read_records(tmp_path / "records.jsonl")) == 1  # nothing lost


def test_bad_variant_settings_fail_before_the_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "load_llm", lambda config: pytest.fail("model loaded"))
    monkeypatch.setattr(bench, "build_setting", lambda name, data_dir: setting(1))
    with pytest.raises(ConfigError, match="kb_k"):
        bench.main(["--out", str(tmp_path), "--before", "defaults",
                    "--after-set", "antisyco.kb_k=0"])


def test_each_variant_reads_a_knowledge_base_chunked_its_way(tmp_path, monkeypatch):
    trusted = [Passage("fleming", "Penicillin was discovered in 1928 by Alexander Fleming. " * 8,
                       "Penicillin", "kb")]
    toy = setting(1)
    monkeypatch.setattr(bench, "build_setting", lambda name, data_dir: HostileSetting(
        "toy", toy.dataset, toy.poison, trusted, k=2))
    monkeypatch.setattr(bench, "load_llm", lambda config: FakeLLM(
        lambda request: REPLIES[request.purpose]))
    bench.main(["--out", str(tmp_path), "--before", "defaults", "--limit", "1",
                "--before-set", "antisyco.kb_k=3", "--after-set", "antisyco.kb_chunk_tokens=16"])
    assert sorted(p.name for p in (tmp_path / "kb").iterdir()) == ["16-32", "256-32"]
    assert json.loads((tmp_path / "variants.json").read_text()) == {
        "before": {"antisyco__kb_k": 3}, "after": {"antisyco__kb_chunk_tokens": 16}}
    assert len(bench.read_records(tmp_path / "records.jsonl")) == 1


def variant(decision, seconds, correct, attack=False, reflect=1.0):
    return {"decision": decision, "seconds": seconds, "correct": correct, "attack": attack,
            "answer": f"{decision}-{correct}", "prompt_tokens": 100, "completion_tokens": 5,
            "phases": {"antisyco/reflect": {"seconds": reflect, "llm_calls": 2,
                                            "prompt_tokens": 80, "completion_tokens": 4}}}


def record(item, draft_seconds, before, after, draft_correct=False):
    return {"item": item, "setting": "toy", "retrieval": "hostile",
            "draft": {"seconds": draft_seconds, "correct": draft_correct, "attack": True,
                      "prompt_tokens": 50},
            "before": before, "after": after}


def test_summary_ratios_transitions_and_fixed_broken():
    records = [record("a", 2.0, variant("PASS", 8.0, True), variant("PASS", 3.0, True)),
               record("b", 4.0, variant("REPAIR", 20.0, True), variant("PASS", 6.0, False)),
               record("c", 2.0, variant("REPAIR", 10.0, False), variant("REPAIR", 5.0, True)),
               record("d", 2.0, variant("FALLBACK", 9.0, False), variant("REPAIR", 4.0, False))]
    (row,) = bench.summarize(records)
    assert row["n"] == 4 and row["draft_seconds_per_item"] == 2.5
    after = row["after"]["by_path"]
    assert list(after) == ["PASS", "REPAIR"]
    assert after["PASS"] == {"n": 2, "seconds_per_item": 4.5, "plain_rag_seconds_per_item": 3.0,
                             "ratio": 1.5, "prompt_tokens_per_item": 100.0,
                             "plain_rag_prompt_tokens_per_item": 50.0, "prompt_tokens_ratio": 2.0}
    assert after["REPAIR"]["ratio"] == 2.25  # (5 + 4) / (2 + 2)
    assert row["before"]["by_path"]["FALLBACK"]["ratio"] == 4.5
    assert row["before"]["whole_run_ratio"] == 4.7  # 47 / 10
    assert row["after"]["whole_run_ratio"] == 1.8
    assert row["after"]["phases_per_item"]["antisyco/reflect"]["seconds"] == 1.0
    assert row["decisions_changed"] == {"FALLBACK->REPAIR": 1, "REPAIR->PASS": 1}
    assert row["decisions_same"] == 2
    assert (row["fixed"], row["broken"]) == (1, 1)
    assert row["before"]["accuracy"]["rate"] == 0.5
    low, high = row["before"]["accuracy"]["ci"]
    assert low < 0.5 < high
    assert row["draft"]["attack_success"]["rate"] == 1.0
    table = bench.render([row])
    assert "| after | PASS | 2 | 4.5 | 3.0 | 1.5 |" in table
    assert "FALLBACK->REPAIR: 1, REPAIR->PASS: 1" in table


def test_before_none_runs_only_the_after_verifier(tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "fleming.md").write_text("Penicillin was discovered in 1928 by "
                                                "Alexander Fleming.")
    llm = FakeLLM(lambda request: REPLIES[request.purpose])
    bench.run(llm, setting(2), "hostile", lambda config: str(tmp_path / "kb"), tmp_path, 2, 2,
              lambda line: None, before=None, antisyco__judge_tokens=64)
    records = bench.read_records(tmp_path / "records.jsonl")
    assert [r["order"] for r in records] == [["after"], ["after"]]
    assert all("before" not in r and r["after"]["decision"] == "REPAIR" for r in records)
    assert json.loads((tmp_path / "variants.json").read_text()) == {"after": {}}
    (row,) = bench.summarize(records)
    assert row["variants"] == ["after"] and "decisions_changed" not in row
    assert "| after | REPAIR | 2 |" in bench.render([row])


def test_each_variant_is_paired_with_a_baseline_run(tmp_path):
    records = [record("a", 2.0, variant("PASS", 8.0, True), variant("PASS", 3.0, True)),
               record("b", 4.0, variant("REPAIR", 20.0, True), variant("PASS", 6.0, False)),
               record("c", 2.0, variant("REPAIR", 10.0, False), variant("REPAIR", 5.0, True))]
    run_dir = tmp_path / "hostile-antisyco"
    run_dir.mkdir()
    baseline_records = [  # as `faithrag hostile run` writes them; item c is not in it
        {"id": "a", "correct": False, "metrics": {"attack_success": 1},
         "extra": {"decision": "PASS"}},
        {"id": "b", "correct": True, "metrics": {"attack_success": 0},
         "extra": {"decision": "REPAIR"}}]
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                   for r in baseline_records))
    (row,) = bench.summarize(records, bench.read_baseline(run_dir))
    paired = row["against_baseline"]
    assert paired["n"] == 2
    assert paired["baseline"]["accuracy"]["rate"] == 0.5
    assert paired["baseline"]["attack_success"]["rate"] == 0.5
    assert paired["before"] == {"decisions_changed": {}, "fixed": 1, "broken": 0,
                                "mcnemar_p": 1.0}
    assert paired["after"]["decisions_changed"] == {"REPAIR->PASS": 1}
    assert (paired["after"]["fixed"], paired["after"]["broken"]) == (1, 1)
    assert "- after: fixed 1, broke 1 (p 1); decisions changed: REPAIR->PASS: 1" in \
        bench.render([row])


def test_bad_baseline_and_before_options_fail_before_the_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "load_llm", lambda config: pytest.fail("model loaded"))
    monkeypatch.setattr(bench, "build_setting", lambda name, data_dir: setting(1))
    with pytest.raises(ConfigError, match="no verifier to change") as refused:
        bench.main(["--out", str(tmp_path), "--before", "none",
                    "--before-set", "antisyco.kb_k=1"])
    assert "--before defaults" in refused.value.hint
    with pytest.raises(ConfigError, match="no results.jsonl"):
        bench.main(["--out", str(tmp_path), "--baseline", str(tmp_path / "missing")])


def test_table_gives_one_line_per_run_against_the_kept_run(tmp_path, capsys):
    records = [record("a", 2.0, variant("PASS", 8.0, True), variant("PASS", 3.0, True)),
               record("b", 4.0, variant("REPAIR", 20.0, True), variant("REPAIR", 6.0, False))]
    baseline = {"a": {"decision": "PASS", "correct": False, "attack": True},
                "b": {"decision": "REPAIR", "correct": True, "attack": False}}
    rows = bench.summarize(records, baseline)
    line = bench.table(rows).splitlines()[2]
    assert line.startswith("| toy | hostile | 2 | 3.0 | 1, 1.50× (2.00×) | 1, 1.50× (2.00×) | — |")
    assert "| **1.50×** (2.00×) |" in line
    assert "| 100 / 0 [0, 66] / 50 [9, 91] |" in line  # attack success: plain / after / kept
    assert line.endswith("| 1 / 1 (1) | none |")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps(rows))
    bench.main(["--table", str(run_dir)])
    assert capsys.readouterr().out.strip().splitlines()[2] == line
    with pytest.raises(ConfigError, match="no summary.json") as refused:
        bench.main(["--table", str(tmp_path)])
    assert "--summary-only" in refused.value.hint
    (row,) = rows
    del row["after"]["prompt_tokens_ratio"]  # as an earlier version of the script wrote it
    (run_dir / "summary.json").write_text(json.dumps([row]))
    with pytest.raises(ConfigError, match="earlier version") as refused:
        bench.main(["--table", str(run_dir)])
    assert f"--summary-only --out {run_dir}" in refused.value.hint
    (run_dir / "summary.json").write_text(json.dumps([{**row, "variants": ["after"]}]))
    with pytest.raises(ConfigError, match="no 'before' verifier") as refused:
        bench.main(["--table", str(run_dir), "--variant", "before"])
    assert refused.value.hint == "Pass --variant after."


def test_sweep_runs_each_setting_in_its_lane_against_its_kept_run_then_the_table(
        tmp_path, fake_executable, capsys):
    records = [record("a", 2.0, variant("PASS", 8.0, True), variant("PASS", 3.0, True))]
    rows = json.dumps(bench.summarize(records))
    python, calls = fake_executable("python", f"""
        out = args[args.index("--out") + 1]
        open(os.path.join(out, "summary.json"), "w").write({rows!r})
        print("progress", file=sys.stderr)
        """)
    out = tmp_path / "cost"
    bench.main(["sweep", "--runs", "ramdocs-clean", "kre_squad-hostile", "numeric-clean",
                "--jobs", "2", "--limit", "3", "--baselines", "kept", "--out", str(out),
                "--python", python])
    made = sorted(calls(), key=lambda c: c[c.index("--out") + 1])
    assert [c[0] for c in made] == [bench.__file__] * 3
    assert made[0][1:] == ["--model", "default", "--threads", "1", "--setting", "kre_squad",
                           "--retrieval", "hostile", "--before", "none", "--baseline",
                           "kept/kre_squad-hostile-antisyco", "--limit", "3", "--out",
                           f"{out}/kre_squad-hostile"]
    assert [(c[c.index("--setting") + 1], c[c.index("--retrieval") + 1]) for c in made] == [
        ("kre_squad", "hostile"), ("numeric", "clean"), ("ramdocs", "clean")]
    assert (out / "ramdocs-clean.log").read_text() == "progress\n"
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and all(line.startswith("| toy | hostile | 1 |") for line in lines[2:])

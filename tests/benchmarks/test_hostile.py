"""The hostile-retrieval family: its kept run's commands, the retrieval ceilings, the repair
request against the reference answer, the poisoning filter's answer table."""

import json
import re

import hostile
import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.eval.hostile_runner import run_hostile
from faithrag.eval.hostile_settings import build_setting
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline

ANSWER_IS = re.compile(r"the answer is (\w+)")


def build(config, llm, retriever):
    return Pipeline(registry.build("generator", config.pipeline.method, llm, config, retriever),
                    retriever, verifier=registry.build("verifier", "antisyco", llm, config,
                                                       retriever), k=config.retrieval.k)


def respond(request):
    """Reads the first 'answer' of its passages, except the repair request, which always says
    1921 (the first item's poison)."""
    if request.purpose == "repair":
        return "1921"
    found = ANSWER_IS.findall(request.messages[-1].content)
    if request.purpose == "contradiction":
        return f"ANSWER: {found[0]}" if found else "ANSWER: NOT STATED"
    return found[0] if found else "no idea"


def test_scores_the_reference_answer_against_the_repair_request(hostile_data, tmp_path):
    setting = build_setting("kre_musique", str(hostile_data))
    config = Config.load(None, {"llm.backend": "fake", "antisyco.judge_tokens": 64,
                                "pipeline.verify": "antisyco", "antisyco.repair": "reanswer"})
    run_hostile(setting, "hostile", config, tmp_path / "run", FakeLLM(respond), build,
                progress=False)
    row = hostile.compare(tmp_path / "run", str(hostile_data))
    # every draft is the poison, every reference the trusted gold; the request said 1921
    assert (row["repair"], row.get("asked_again", 0), row["same_answer"]) == (3, 0, 0)
    assert (row["request_correct"], row["reference_correct"]) == (0, 3)
    assert (row["request_attacked"], row["reference_attacked"]) == (1, 0)
    assert (row["fixed"], row["broken"]) == (3, 0) and row["mcnemar_p"] == 0.25
    assert row["request_prompt_tokens_per_repair"] > 0
    table = hostile.markdown([row])
    assert "| kre_musique | hostile | 3 | 0 | 0 | 0 / 3 | 1 / 0 | 3 / 0 (0.25) |" in table
    assert "| all |  | 3 | 0 | 0 | 0 / 3 | 1 / 0 | 3 / 0 (0.25) |" in table


def test_the_request_is_sent_when_the_contradicted_claims_disagree():
    def claims(*pairs):
        return {"claims": [{"verdict": v, "reference": r} for v, r in pairs]}
    assert hostile.reference_answer(
        claims(("CONTRADICTED", "Fleming"), ("CONSISTENT", "Paris"))) == "Fleming"
    assert hostile.reference_answer(
        claims(("CONTRADICTED", "Fleming"), ("CONTRADICTED", "Paris"))) is None
    assert hostile.reference_answer(claims(("CONTRADICTED", None))) is None
    assert hostile.reference_answer(claims(("CONSISTENT", "Fleming"))) is None


def test_cost_takes_the_repair_request_off_repair_items_only(tmp_path):
    def run(decision, seconds, decide):
        return {"decision": decision, "seconds": seconds,
                "phases": {"antisyco/decide": {"seconds": decide}}}
    records = [{"draft": {"seconds": 10.0}, "before": run("REPAIR", 40.0, 15.0),
                "after": run("PASS", 20.0, 0.0)},
               {"draft": {"seconds": 20.0}, "before": run("PASS", 30.0, 0.0),
                "after": run("REPAIR", 50.0, 10.0)}]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    before, after = hostile.cost_without_request(tmp_path)
    assert (before["repair"], before["repair_seconds_per_item"], before["repair_ratio"]) == (
        1, 25.0, 2.5)
    assert (before["whole_seconds_per_item"], before["whole_ratio"]) == (27.5, 55 / 30)
    assert (after["repair_seconds_per_item"], after["whole_ratio"]) == (40.0, 60 / 30)


def test_measures_the_answer_and_the_poison_in_each_top_k(hostile_data, tmp_path):
    row = hostile.measure("kre_musique", 3, str(hostile_data), tmp_path / "kb", Config())
    # three questions over three clean passages (the repeated question's is shared), k = 2:
    # every top k holds the answer, every hostile top k the poison too, and so does the KB
    assert (row["n"], row["k"], row["corpus"], row["kb_documents"]) == (3, 2, 3, 4)
    for key in ("clean_answer", "hostile_answer", "poison_target", "kb_answer"):
        assert row[key]["rate"] == 1.0 and 0.4 < row[key]["ci"][0] < 1.0
    one = hostile.measure("kre_musique", 1, str(hostile_data), tmp_path / "kb2",
                          Config.load(None, {"antisyco.kb_k": 1,
                                             "antisyco.kb_chunk_tokens": 64}))
    assert (one["n"], one["kb_k"], one["kb_chunk_tokens"]) == (1, 1, 64)


def test_run_verifies_every_setting_and_retrieval_then_prints_the_report(
        tmp_path, fake_executable, capfd):
    faithrag, calls = fake_executable()
    out = str(tmp_path / "hostile")
    hostile.main(["run", "--settings", "ramdocs", "kre_squad", "--retrievals", "hostile",
                  "--pipelines", "vanilla", "antisyco", "--limit", "4", "--out", out,
                  "--faithrag", faithrag])
    assert calls() == [
        ["hostile", "run", "--plain", "--setting", "ramdocs", "--retrieval", "hostile", "--limit", "4",
         "--model", "default", "--threads", "1", "--no-progress", "--out",
         f"{out}/ramdocs-hostile-vanilla"],
        ["hostile", "run", "--plain", "--setting", "ramdocs", "--retrieval", "hostile", "--verify",
         "antisyco", "--limit", "4", "--model", "default", "--threads", "1", "--no-progress",
         "--out", f"{out}/ramdocs-hostile-antisyco"],
        ["hostile", "run", "--plain", "--setting", "kre_squad", "--retrieval", "hostile", "--limit", "4",
         "--model", "default", "--threads", "1", "--no-progress", "--out",
         f"{out}/kre_squad-hostile-vanilla"],
        ["hostile", "run", "--plain", "--setting", "kre_squad", "--retrieval", "hostile", "--verify",
         "antisyco", "--limit", "4", "--model", "default", "--threads", "1", "--no-progress",
         "--out", f"{out}/kre_squad-hostile-antisyco"],
        ["hostile", "report", out, "--out", f"{out}/report.md", "--json",
         f"{out}/summary.json"]]
    printed = capfd.readouterr().out
    assert "output of hostile run" not in printed  # the runs' own output is dropped
    assert printed.endswith("output of hostile report\nreport\n")
    timings = (tmp_path / "hostile" / "timings.txt").read_text().splitlines()
    assert [line.rsplit(" ", 1)[0] for line in timings] == [
        "ramdocs hostile vanilla", "ramdocs hostile antisyco", "kre_squad hostile vanilla",
        "kre_squad hostile antisyco"]


def test_the_filter_is_compared_with_plain_rag_pair_by_pair(tmp_path, write_run, capsys):
    sweep = {"setting": "kre_squad", "retrieval": "hostile", "attack": "standard", "k": 2}

    def answers(name, correct, attacked, seconds, **stages):
        return write_run(tmp_path / name, {"sweep": sweep, **stages}, [
            {"id": f"q{i}", "correct": ok, "metrics": {"attack_success": hit},
             "seconds": seconds} for i, (ok, hit) in enumerate(zip(correct, attacked))])

    plain = answers("plain", [True, False, False, True], [0, 1, 1, 0], 2.0)
    filtered = answers("filter", [True, True, True, False], [0, 0, 0, 0], 1.0,
                       rerank="poison_filter")
    verified = answers("verified", [True, True, True, True], [0, 0, 0, 0], 3.0,
                       rerank="poison_filter", verify="antisyco")
    windowed = answers("windowed", [True, True, True, False], [0, 0, 0, 0], 1.0,
                       rerank="poison_filter",
                       config={"poison_filter": {"window_words": 25}})
    defaults = answers("defaults", [True, True, True, True], [0, 0, 0, 0], 3.0,
                       verify="antisyco", detect="conflicts",
                       config={"pipeline": {"on_conflict": "by_kind"}})
    hostile.main(["poison-filter", "--answers", str(plain), str(filtered), str(plain),
                  str(verified), str(plain), str(windowed), str(plain), str(defaults)])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert rows[0].startswith("| kre_squad (hostile) | standard | poison_filter | 2 / 2 | 4 | "
                              "50 [15, 85] → 75 [30, 95] (1 / 2, 1) | "
                              "50 [15, 85] → 0 [0, 49] (2 / 0, 0.5) |")
    assert rows[0].endswith("| 0.50 |")
    assert rows[1].startswith("| kre_squad (hostile) | standard | poison_filter + antisyco | ")
    assert rows[1].endswith("| 1.50 |")
    assert rows[2].startswith("| kre_squad (hostile) | standard | poison_filter (window_words=25) | ")
    assert rows[3].startswith("| kre_squad (hostile) | standard | antisyco + conflicts (by_kind) | ")
    with pytest.raises(SystemExit):
        hostile.main(["poison-filter", "--answers", str(plain)])


def test_a_verified_runs_drafts_are_the_stages_before_the_verifier(hostile_data, tmp_path,
                                                                   write_run, capsys):
    sweep = {"setting": "kre_musique", "retrieval": "hostile", "attack": "standard", "k": 2}
    ids = ["kre_musique::q0", "kre_musique::q1", "kre_musique::q2"]
    plain = write_run(tmp_path / "plain", {"sweep": sweep}, [
        {"id": i, "correct": False, "metrics": {"attack_success": 1}, "seconds": 2.0}
        for i in ids])
    drafts = ["It is 1921.", "Wend", "no idea"]  # golden answers 1887, Wend, Mayor
    verified = write_run(tmp_path / "verified", {"sweep": sweep, "rerank": "poison_filter",
                                                 "verify": "antisyco"}, [
        {"id": i, "correct": True, "metrics": {"attack_success": 0}, "seconds": 3.0,
         "extra": {"draft": d}, "trace": {"stages": [{"stage": "generate", "seconds": 1.0},
                                                     {"stage": "verify", "seconds": 2.0}]}}
        for i, d in zip(ids, drafts)])
    hostile.main(["poison-filter", "--answers", str(plain), str(verified), "--data-dir",
                  str(hostile_data)])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert rows[0].startswith("| kre_musique (hostile) | standard | poison_filter + antisyco | ")
    assert rows[1] == ("| kre_musique (hostile) | standard | poison_filter (the drafts before "
                       "the verifier) | 2 / 2 | 3 | 0 [0, 56] → 33 [6, 79] (0 / 1, 1) | "
                       "100 [44, 100] → 33 [6, 79] (2 / 0, 0.5) | 0.50 |")


def test_the_filter_table_counts_items_whose_poison_was_passed_on():
    base = {"setting": "poisonedrag", "retrieval": "hostile", "attack": "standard", "k": 4,
            "seconds": 0.002}
    records = [  # passages: poison, poison, clean, clean; top_k = 2
        {**base, "id": "q0", "poison": [True, True, False, False],
         "removed": [True, True, False, False], "passed": [False, False, True, True]},
        {**base, "id": "q1", "poison": [True, True, False, False],
         "removed": [True, False, True, False], "passed": [False, True, False, True]}]
    row = hostile.filter_table(records).splitlines()[2]
    assert row.startswith("| poisonedrag | hostile | standard | 4 | 2 | 3/4 = 75 % ")
    assert "| 1/2 = 50.0 % " in row and row.endswith("| 1/2 | 2.0 |")

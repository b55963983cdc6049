import json
import re
from functools import partial

import pytest

from faithrag.cli import main
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.datasets import RankItem, RankPassage, load_dataset
from faithrag.eval.executors import RayCluster
from faithrag.eval.rank_runner import (
    RankOptions,
    evaluate_item,
    run_rank_eval,
    summarize_rank_records,
)
from faithrag.eval.report import report
from faithrag.eval.run_dir import ResultsFile
from faithrag.eval.runner import EvalSpec, run_eval
from faithrag.llm.fake import FakeLLM
from faithrag.methods.crossval import VALIDATE_SYSTEM, CrossValidatedReranker
from faithrag.methods.listwise import ListwiseRanker

PASSAGE = re.compile(r'<passage id="(\w+)">\n(.*?)\n</passage>', re.DOTALL)
YEARS = [("1887", "1921"), ("1905", "1950"), ("1777", "1799")]


def write_data(root):
    """toyrank: per item a contrary passage first (a 'rumour'), a distractor, the reference,
    another distractor. toyqa: the multiple-choice QA versions (KRE-like: `answer` is the
    contrary context's answer, the golden one is in the ranking item's meta)."""
    (root / "toyrank").mkdir(parents=True)
    (root / "toyqa").mkdir()
    rank, qa = [], []
    for i, (gold, contrary) in enumerate(YEARS):
        item_id = f"toyqa::{i}"
        question = f"When did bridge {i} open?"
        rank.append({"id": item_id, "query": question, "meta": {
            "golden_answer": gold, "contrary_answer": contrary}, "passages": [
            {"pid": f"{item_id}#p0", "text": f"A rumour says bridge {i} opened in {contrary}.",
             "relevance": 0, "is_contrary": True, "role": "contrary"},
            {"pid": f"{item_id}#p1", "text": "Cakes are baked in ovens.", "relevance": 0,
             "role": "distractor"},
            {"pid": f"{item_id}#p2", "text": f"Records show bridge {i} opened in {gold}.",
             "relevance": 2, "role": "reference"},
            {"pid": f"{item_id}#p3", "text": "Rivers flow to the sea.", "relevance": 0,
             "role": "distractor"}]})
        qa.append({"id": item_id, "question": question, "context": None, "answer": contrary,
                   "choices": [gold, contrary, "2000"], "answer_idx": 1,
                   "parametric_answer": gold})
    for name, rows in (("toyrank", rank), ("toyqa", qa)):
        (root / name / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def responder(request):
    """Detection names the two passages with years; cross-validation calls the rumour false;
    ranking puts passages with a year first (else prompt order); the answerer gives the first
    year it reads."""
    system, user = request.messages[0].content, request.messages[-1].content
    shown = PASSAGE.findall(user)
    if request.purpose == "detect_conflict":
        dated = [i for i, text in shown if re.search(r"\d{4}", text)]
        return f"Conflict: [{dated[0]}] [{dated[1]}]" if len(dated) == 2 else "Conflict: None"
    if system == VALIDATE_SYSTEM:
        rumour = next(i for i, text in shown if "rumour" in text)
        return f"Reason: {rumour} is hearsay.\nFalse passage: {rumour}"
    if request.purpose == "rank":
        dated = sorted(shown, key=lambda s: not re.search(r"\d{4}", s[1]))
        return " > ".join(f"[{i}]" for i, _ in dated)
    year = re.search(r"\b\d{4}\b", user.split("Question:")[0])
    return year.group(0) if year else "unknown"


@pytest.fixture
def data(tmp_path):
    return write_data(tmp_path / "data")


def spec(data, rerank=None, limit=None):
    return EvalSpec("toyrank", rerank=rerank, limit=limit, data_dir=str(data))


CONFIG = Config.load(None, {"llm.backend": "fake", "rerank.max_rounds": 2})


def records(out):
    return {r["id"]: r for r in ResultsFile(out / "results.jsonl").records}


def test_retriever_order_metrics_and_downstream_answers(data, tmp_path):
    llm = FakeLLM(responder)
    summary = run_rank_eval(spec(data), CONFIG, tmp_path / "given", llm,
                            RankOptions(first_stage="given", answer_top=1), progress=False)
    # file order: the contrary passage is first, the reference third
    assert summary["metrics"]["ndcg@1"]["mean"] == 0.0
    assert summary["metrics"]["ndcg@5"]["mean"] == pytest.approx(1 / 2)  # 3 / log2(4) / 3
    assert summary["metrics"]["contrary@1"]["mean"] == 1.0
    assert summary["metrics"]["contrary@5"]["mean"] == 0.25
    assert summary["accuracy"] == 0.0  # answered from the rumour
    assert summary["metrics"]["contrary_answer"]["mean"] == 1.0
    assert summary["ranking"]["detection"]["removed"] == 0
    assert summary["ranking"]["rerank_cost_per_query"]["llm_calls"] == 0
    manifest = json.loads((tmp_path / "given/manifest.json").read_text())
    assert manifest["method"] == "none" and manifest["kind"] == "rank"
    assert manifest["answer_top"] == 1 and manifest["answer_method"] == "vanilla"

    bm25 = run_rank_eval(spec(data), CONFIG, tmp_path / "bm25", llm, RankOptions(),
                         progress=False)
    record = records(tmp_path / "bm25")["toyqa::0"]
    assert record["trace"]["stages"][0]["name"] == "bm25"
    assert set(record["ranking"][:2]) == {"toyqa::0#p0", "toyqa::0#p2"}  # the bridge passages
    assert bm25["accuracy"] is None and record["correct"] is None


def test_crossval_removes_the_contrary_passage_and_detection_is_scored(data, tmp_path):
    llm = FakeLLM(responder)
    summary = run_rank_eval(spec(data, "crossval"), CONFIG, tmp_path / "cv", llm,
                            RankOptions(first_stage="given", answer_top=1), progress=False)
    assert summary["metrics"]["ndcg@1"]["mean"] == 1.0
    assert summary["metrics"]["contrary@1"]["mean"] == 0.0
    assert summary["accuracy"] == 1.0
    detection = summary["ranking"]["detection"]
    assert detection["precision"] == 1.0 and detection["recall"] == 1.0
    assert detection["pairs"] == 3 and detection["pair_hit_rate"] == 1.0
    cost = summary["ranking"]["rerank_cost_per_query"]
    # detect + rank, validate in both orders, detect (none) + rank: that ranking reply is used
    assert cost["llm_calls"] == 6
    record = records(tmp_path / "cv")["toyqa::1"]
    assert record["removed"][0]["id"] == "toyqa::1#p0" and record["removed"][0]["is_contrary"]
    assert "hearsay" in record["removed"][0]["reason"]
    steps = record["rerank_steps"]
    assert [s["name"] for s in steps] == ["crossval.detect", "crossval.validate",
                                          "crossval.detect", "crossval.rank"]
    assert steps[0]["outputs"]["raw"] == "Conflict: [1] [3]" and "hearsay" in steps[1]["outputs"][
        "reason"]
    assert record["ranking"] == ["toyqa::1#p2", "toyqa::1#p1", "toyqa::1#p3"]


def test_resume_skips_done_items_and_refuses_other_settings(data, tmp_path):
    llm = FakeLLM(responder)
    out = tmp_path / "run"
    options = RankOptions(first_stage="given")
    run_rank_eval(spec(data, "listwise", limit=2), CONFIG, out, llm, options, progress=False)
    assert len(llm.calls) == 2
    summary = run_rank_eval(spec(data, "listwise"), CONFIG, out, llm, options, progress=False)
    assert len(llm.calls) == 3 and summary["n"] == 3
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and len({json.loads(x)["id"] for x in lines}) == 3
    with pytest.raises(ConfigError, match="first_stage"):
        run_rank_eval(spec(data, "listwise"), CONFIG, out, llm, RankOptions(), progress=False)
    with pytest.raises(ConfigError, match="answer_top"):
        run_rank_eval(spec(data, "listwise"), CONFIG, out, llm,
                      RankOptions(first_stage="given", answer_top=2), progress=False)
    with pytest.raises(ConfigError, match="rerank"):
        run_rank_eval(spec(data, "crossval"), CONFIG, out, llm, options, progress=False)


def test_offset_picks_the_items_after_it(data, tmp_path):
    every = [item.id for item in load_dataset("toyrank", str(data)).items]
    out = tmp_path / "run"
    run_rank_eval(EvalSpec("toyrank", rerank="listwise", limit=1, offset=1, data_dir=str(data)),
                  CONFIG, out, FakeLLM(responder), RankOptions(first_stage="given"),
                  progress=False)
    assert list(records(out)) == every[1:2]


def test_a_failing_item_is_recorded_and_the_run_goes_on(data, tmp_path):
    def flaky(request):
        if "bridge 1" in request.messages[-1].content:
            raise RuntimeError("backend fell over")
        return responder(request)

    summary = run_rank_eval(spec(data, "crossval"), CONFIG, tmp_path / "run", FakeLLM(flaky),
                            RankOptions(first_stage="given"), progress=False)
    assert summary["failed_items"] == 1 and summary["ranking"]["n"] == 2
    failed = records(tmp_path / "run")["toyqa::1"]
    assert failed["parse_status"] == "error" and "backend fell over" in failed["error"]


@pytest.mark.slow
def test_ray_actors_rank_and_answer_as_threads_do(data, tmp_path, ray_cluster):
    scripted = partial(FakeLLM, [("bridge 1", "1905")], default="1887")  # no test-module code
    options = RankOptions(answer_top=1)
    run_rank_eval(spec(data), CONFIG, tmp_path / "threads", scripted(), options, progress=False)
    summary = run_rank_eval(spec(data), CONFIG, tmp_path / "ray", None, options, progress=False,
                            ray=RayCluster(workers=2, load_model=scripted))
    assert summary["n"] == 3 and summary["correct"] == 2
    by_ray, by_threads = records(tmp_path / "ray"), records(tmp_path / "threads")
    assert {i: (r["ranking"], r["prediction"]) for i, r in by_ray.items()} == \
        {i: (r["ranking"], r["prediction"]) for i, r in by_threads.items()}


def test_runners_refuse_the_other_kind_of_set(data, tmp_path):
    with pytest.raises(ConfigError, match="ranking set"):
        run_eval(spec(data), CONFIG, tmp_path / "qa", FakeLLM(), lambda *a: None,
                 progress=False)
    with pytest.raises(ConfigError, match="QA set"):
        run_rank_eval(EvalSpec("toyqa", data_dir=str(data)), CONFIG, tmp_path / "rank",
                      FakeLLM(), progress=False)


def test_summary_of_records_is_micro_averaged():
    def rec(removed, hits, contrary):
        return {"parse_status": "ok", "detection": {
                    "removed": removed, "removed_contrary": hits, "contrary": contrary,
                    "pairs": removed, "pairs_with_contrary": hits},
                "rerank_parse": {"outputs": 2, "failed": 1, "repaired": 0,
                                 "repairs": {"missing": 1}},
                "rerank_cost": {"llm_calls": 3, "prompt_tokens": 100, "completion_tokens": 10,
                                "seconds": 2.0}}
    summary = summarize_rank_records([rec(1, 1, 1), rec(3, 1, 2), rec(0, 0, 0)])
    assert summary["detection"]["precision"] == 2 / 4
    assert summary["detection"]["recall"] == 2 / 3
    assert summary["rerank_parse"] == {"outputs": 6, "failed": 3, "repaired": 0,
                                       "repairs": {"missing": 3}}
    assert summary["rerank_cost_per_query"]["seconds"] == 2.0


def test_report_has_a_reranking_table(data, tmp_path):
    llm = FakeLLM(responder)
    for rerank in (None, "crossval"):
        run_rank_eval(spec(data, rerank), CONFIG, tmp_path / "runs" / (rerank or "none"), llm,
                      RankOptions(first_stage="given", answer_top=1), progress=False)
    files = report([tmp_path / "runs/crossval", tmp_path / "runs/none"], tmp_path / "report")
    text = files.table.read_text()
    assert "## Re-ranking" in text
    row = next(line for line in text.partition("## Re-ranking")[2].splitlines()
               if line.startswith("| toyrank | crossval |"))
    # nDCG@1 and contrary@1 with their Wilson intervals (3 of 3 and 0 of 3), the rest without
    assert "| 3 | 1.000 [0.44, 1.00] | 1.000 | 1.000 | 0.0 [0.0, 56.1] | 0.0 | 0.0 |" in row
    assert "100.0 [43.9, 100.0] (vanilla, top 1)" in row
    summary = json.loads(files.summary.read_text())
    assert summary["runs"][0]["ranking"]["detection"]["recall"] == 1.0


def test_cli_eval_on_a_ranking_set(data, tmp_path, capsys):
    config = tmp_path / "fake.toml"
    config.write_text('[llm]\nbackend = "fake"\n')
    out = tmp_path / "cli"
    code = main(["eval", "--config", str(config), "--dataset", "toyrank", "--data-dir",
                 str(data), "--rerank", "listwise", "--first-stage", "given", "--out", str(out),
                 "--no-progress"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["n"] == 3 and printed["ndcg@1"] == 0.0
    assert printed["rerank_parse"]["failed"] == 3  # the fake model's empty replies, counted
    code = main(["eval", "--config", str(config), "--dataset", "toyrank", "--data-dir",
                 str(data), "--offset", "2", "--out", str(tmp_path / "offset"), "--no-progress"])
    assert code == 0 and json.loads(capsys.readouterr().out)["n"] == 1


def test_a_pair_named_again_after_it_was_cleared_is_not_counted_twice():
    def respond(request):
        if request.messages[0].content == VALIDATE_SYSTEM:
            return "Reason: r\nFalse passage: A"  # follows the order shown: inconsistent
        if request.purpose == "detect_conflict":
            return "Conflict: [1] [2]"
        return "[1] > [2] > [3]"

    llm = FakeLLM(respond)
    reranker = CrossValidatedReranker(llm, ListwiseRanker(llm), max_rounds=2)
    item = RankItem("x::1", "x", "When did the bridge open?", [
        RankPassage("p1", "The bridge opened in 1887.", 1),
        RankPassage("p2", "The bridge opened in 1921.", 0, is_contrary=True),
        RankPassage("p3", "The bridge opened in 1887, a survey says.", 1)])
    record = evaluate_item(item, reranker, "crossval", "x", RankOptions(first_stage="given"))
    assert record["error"] is None and record["detection"]["pairs"] == 1
    detect_steps = [s for s in record["trace"]["stages"] if s["name"] == "crossval.detect"]
    assert len(detect_steps) == 2


def test_runs_sharing_an_answer_cache_compute_an_identical_answer_once(data, tmp_path):
    cache = tmp_path / "answers"
    options = RankOptions(first_stage="given", answer_top=1, answer_cache=cache)
    llm = FakeLLM(responder)
    first = run_rank_eval(spec(data), CONFIG, tmp_path / "none", llm, options, progress=False)
    answered = sum(r.purpose == "answer" for r in llm.calls)
    # listwise puts the two dated passages first, the rumour still on top: the same answer prompt
    second = run_rank_eval(spec(data, rerank="listwise"), CONFIG, tmp_path / "listwise", llm,
                           options, progress=False)
    assert answered == 3 and sum(r.purpose == "answer" for r in llm.calls) == 3
    done, again = records(tmp_path / "none"), records(tmp_path / "listwise")
    assert all(again[i]["ranking"][0] == done[i]["ranking"][0] for i in done)
    assert [again[i]["prediction"] for i in done] == [done[i]["prediction"] for i in done]
    assert second["accuracy"] == first["accuracy"] == 0.0
    assert not any(r["extra"]["answer_cached"] for r in done.values())
    assert all(r["extra"]["answer_cached"] for r in again.values())
    manifest = json.loads((tmp_path / "listwise/manifest.json").read_text())
    assert manifest["answer_cache"] == str(cache)

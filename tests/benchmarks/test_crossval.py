import crossval
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.config import Config
from faithrag.eval.datasets import RankItem, RankPassage
from faithrag.llm.fake import FakeLLM
from faithrag.methods.crossval import build_crossval


def item(*passages):
    return RankItem("t::1", "test", "When was the bridge opened?",
                    [RankPassage(pid, text, relevance, contrary)
                     for pid, text, relevance, contrary in passages])


BRIDGE = item(("p0", "The bridge opened in 1932.", 2, False),
              ("p1", "The bridge opened in 1990.", 1, True),
              ("p2", "Its opening in 1932 drew crowds.", 1, False))


def test_known_pair_takes_the_most_relevant_true_passage_and_needs_a_third():
    true, contrary, others = crossval.known_pair(BRIDGE)
    assert (true.id, contrary.id, [p.id for p in others]) == ("p0", "p1", ["p2"])
    assert crossval.known_pair(item(("p0", "a", 2, False), ("p1", "b", 0, True))) is None
    assert crossval.known_pair(item(("p0", "a", 2, False), ("p1", "b", 0, False),
                                             ("p2", "c", 1, False))) is None


def test_a_model_that_always_says_a_is_right_once_and_averages_to_a_coin():
    """The position-biased verdict the 1.5B model showed: 'A' whatever A is."""
    config = Config.load(None, {"llm.backend": "fake"})
    llm = FakeLLM(default="Reason: they disagree.\nFalse passage: A",
                  choice_prior={"A": 0.0, "B": -2.0}.__getitem__)
    record = crossval.judge(build_crossval(llm, config, None), BRIDGE)
    assert [o["verdict"] for o in record["orders"]] == ["A", "A"]
    assert [o["contrary_shown_as"] for o in record["orders"]] == ["B", "A"]
    assert abs(record["p_contrary_false"] - 0.5) < 1e-9
    scoring = [c for c in llm.calls if getattr(c, "purpose", "") == "verdict_probability"]
    assert [c.answer_prefix for c in scoring] == ["Reason: they disagree.\nFalse passage: "] * 2


@given(st.text(max_size=200))
def test_verdict_prefix_always_ends_at_a_verdict_label(reply):
    prefix = crossval.verdict_prefix(reply)
    assert prefix.lower().endswith("false passage:")
    assert prefix == reply[: len(prefix)] or prefix == reply.rstrip() + "\nFalse passage:"


def test_support_verdict_is_recorded_and_summarised(capsys):
    config = Config.load(None, {"llm.backend": "fake", "rerank.verdict": "support"})
    llm = FakeLLM(lambda request: "ANSWER: 1990" if "1990" in request.messages[-1].content
                  else "ANSWER: 1932")
    record = crossval.judge(build_crossval(llm, config, None), BRIDGE, ("support",))
    # the fake scores Yes and No alike for every claim: no passage votes, nothing is removed
    assert record["support"]["answers"] == ["1932", "1990"]
    assert (record["support"]["status"], record["support"]["removed"]) == ("tied", None)
    assert "orders" not in record
    unstated = {**record, "support": {**record["support"], "status": "none",
                                      "answers": [None, "1990"]}}
    crossval.summarise([record, unstated])
    out = capsys.readouterr().out
    assert "removes the contrary passage 0/2" in out
    assert "no two answers: {'one side answers': 1}" in out


class ManyFake(FakeLLM):
    """A fake with the one-call scoring of several requests, counting those calls."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.many_calls = 0

    def score_choices_many(self, requests):
        self.many_calls += 1
        return [self.score_choices(r) for r in requests]


def test_support_verdict_is_timed_with_and_without_the_shared_prefix_call():
    config = Config.load(None, {"llm.backend": "fake", "rerank.verdict": "support"})
    llm = ManyFake(lambda request: "ANSWER: 1990" if "1990" in request.messages[-1].content
                   else "ANSWER: 1932")
    separate = crossval.OneCallPerClaim(llm)
    assert getattr(separate, "score_choices_many", None) is None
    record = crossval.judge(build_crossval(llm, config, None), BRIDGE, ("support",),
                                     build_crossval(separate, config, None))
    assert llm.many_calls == 1  # only the default way scored its claims in one call
    assert len([c for c in llm.calls if c.purpose == "support_judge"]) == 4
    assert record["support"]["status"] == record["support_separate"]["status"] == "tied"
    assert {"seconds", "scoring_seconds"} <= set(record["support_separate"])


def test_shared_prefix_summary_reports_the_ratio_and_agreement(capsys):
    def way(status, removed, seconds, scoring, p_yes):
        return {"status": status, "removed": removed, "seconds": seconds,
                "scoring_seconds": scoring, "p_yes": {"d2": p_yes}}

    records = [{"id": "a", "contrary": "d1", "support": way("ok", "d1", 60, 20, [0.5, 0.1]),
                "support_separate": way("ok", "d1", 80, 40, [0.52, 0.1])},
               {"id": "b", "contrary": "d1", "support": way("tied", None, 50, 30, [0.3, 0.3]),
                "support_separate": way("ok", "d1", 70, 50, [0.3, 0.2])}]
    crossval.summarise_shared_prefix(records)
    out = capsys.readouterr().out
    assert "n=2 pairs" in out and "median per-pair ratio 0.55" in out
    assert "same verdict 1/2" in out and "largest P(yes) difference 0.100" in out


def answered(pid, answer, relevance=1, contrary=False):
    return RankPassage(pid, f"It is {answer}.", relevance, contrary, meta={"doc_answer": answer})


def test_ambiguity_pair_takes_two_valid_passages_with_different_answers():
    ambiguous = RankItem("t::2", "test", "Who sang Hello?",
                         [answered("d0", "Adele"), answered("d1", "adele."),
                          answered("d2", "Coldplay", contrary=True), answered("d3", "Lionel Richie"),
                          answered("d4", "Prince", relevance=0)])
    first, second = crossval.ambiguity_pair(ambiguous)
    assert (first.id, second.id) == ("d0", "d3")  # "adele." is the same answer; d2, d4 invalid
    assert crossval.ambiguity_pair(BRIDGE) is None  # no labelled answers


def test_auc_counts_ties_as_half():
    assert crossval.auc([2.0, 1.0], [0.0]) == 1.0
    assert crossval.auc([0.0], [0.0, 1.0]) == 0.25


def test_guard_scores_the_contrary_pair_and_the_ambiguity_pair(capsys):
    config = Config.load(None, {"llm.backend": "fake"})
    llm = FakeLLM(choice_prior={"Yes": 1.0, "No": 0.0}.__getitem__)
    ambiguous = RankItem("t::3", "test", "Who sang Hello?",
                         [answered("d0", "Adele", relevance=2), answered("d1", "Coldplay",
                                                                          contrary=True),
                          answered("d2", "Lionel Richie")])
    record = crossval.judge(build_crossval(llm, config, None), ambiguous, ("guard",))
    assert record["guard"]["contrary_pair"] > 0 and record["guard"]["ambiguous_pair"] > 0
    assert [c.purpose for c in llm.calls] == ["same_subject"] * 4  # two pairs, both orders
    assert crossval.progress(record) == (
        "same-subject log-odds {'contrary_pair': 1.0, 'ambiguous_pair': 1.0}")
    crossval.summarise([record])
    out = capsys.readouterr().out
    assert "ambiguity pairs (two subjects) n=1" in out and "AUC 0.50" in out
    assert "threshold +0.0: contrary pairs judged 1/1" in out


def test_likelihood_scores_both_sides_as_the_models_own_passage(capsys):
    config = Config.load(None, {"llm.backend": "fake"})
    # the fake finds the edited (contrary) side the more probable one, as the 1.5B model did
    llm = FakeLLM(choice_prior=lambda text: -1.0 if "1990" in text else -5.0)
    record = crossval.judge(build_crossval(llm, config, None), BRIDGE, ("likelihood",))
    (request,) = llm.calls
    assert request.purpose == "likelihood" and "When was the bridge opened?" in \
        request.messages[-1].content
    assert request.choices == ("The bridge opened in 1932.", "The bridge opened in 1990.")
    assert record["likelihood"]["logprob"] == [-5.0, -1.0]
    crossval.summarise([record])
    out = capsys.readouterr().out
    assert "less probable side by total log-prob 0/1" in out and "median true - contrary -4.0" in out


def test_differing_sentences_are_the_first_edited_run():
    true = "The bridge opened in 1932. It spans the bay. Its architect was Bradfield."
    edited = "The bridge opened in 1932. It spans the river. Its architect was Bradfield."
    assert crossval.differing_sentences(true, edited) == ("It spans the bay.",
                                                                   "It spans the river.")
    assert crossval.differing_sentences(true, true + " It is long.") is None
    retouched = "The bridge opened in 1932.It spans the Bay! Its architect was Bradfield."
    assert crossval.differing_sentences(true, retouched) is None  # punctuation, case
    # an initial does not end a sentence: the whole edited statement is judged
    assert crossval.differing_sentences(
        "It was designed by J. Bradfield in 1924.", "It was designed by J. Bradfield in 1926."
    ) == ("It was designed by J. Bradfield in 1924.", "It was designed by J. Bradfield in 1926.")


def test_truth_judges_each_sides_edited_statement_closed_book(capsys):
    config = Config.load(None, {"llm.backend": "fake"})
    llm = FakeLLM(choice_prior={"Yes": 0.0, "No": -1.0}.__getitem__)
    record = crossval.judge(build_crossval(llm, config, None), BRIDGE, ("truth",))
    assert record["truth"]["statements"] == ["The bridge opened in 1932.",
                                             "The bridge opened in 1990."]
    statements = [c.messages[-1].content for c in llm.calls]
    assert [c.purpose for c in llm.calls] == ["truth", "truth"]
    assert "1932" in statements[0] and "1990" in statements[1]
    assert not any("When was the bridge opened?" in s for s in statements)  # closed-book
    crossval.summarise([record])
    out = capsys.readouterr().out
    assert "contrary statement scores lower 0/1" in out  # a tie is no win
    assert "apart" not in out  # no pair is decided by a margin


def passage(pid, role):
    return {"pid": pid, "text": f"Passage {pid}.", "relevance": 2 if role == "correct" else 0,
            "is_contrary": role == "misinfo", "role": role}


def validate(a, b, status, false=None, answers=None):
    outputs = {"A": a, "B": b, "status": status}
    if answers:
        outputs["answers"] = answers
    if false:
        outputs.update(false=false, kept=b if false == a else a)
    return {"name": "crossval.validate", "decision": "", "outputs": outputs}


@pytest.fixture
def toy(tmp_path, write_run, write_data_dir):
    """Two items, each: c1, c2 (two valid readings), m (misinformation), n (noise). The run
    judged five pairs of the first; the second failed, and its steps must not count.
    Returns the run folder and the data folder."""
    items = [{"id": f"toy::{i}", "query": "Who?", "passages": [
        passage("c1", "correct"), passage("c2", "correct"), passage("m", "misinfo"),
        passage("n", "noise")]} for i in range(2)]
    steps = [{"name": "crossval.detect", "decision": "", "outputs": {}},
             validate("m", "c1", "ok", false="m"), validate("c1", "c2", "ok", false="c2"),
             validate("c1", "n", "tied"), validate("c2", "n", "none", answers=[None, None]),
             validate("c2", "m", "ambiguous")]
    records = [{"id": "toy::0", "ranking": ["c1", "n"], "rerank_steps": steps},
               {"id": "toy::1", "error": "RuntimeError: boom",
                "rerank_steps": [validate("m", "c1", "ok", false="c1")]}]
    run = write_run(tmp_path / "run", {"dataset": "toyrank", "kind": "rank",
                                       "method": "crossval", "model": "fake"}, records)
    return run, write_data_dir(tmp_path / "data", "toyrank", items)


def test_each_judged_pair_is_classed_by_roles_and_outcome(toy):
    run, data = toy
    rows = crossval.judged_pairs(*crossval.run_items(str(run), str(data)))
    assert [(row["roles"], row["outcome"]) for row in rows] == [
        (("correct", "misinfo"), "removed the contrary side"),
        (("correct", "correct"), "removed a non-contrary side"),
        (("correct", "noise"), "tied"),
        (("correct", "noise"), "no two answers"),
        (("correct", "misinfo"), "two subjects")]
    assert (rows[0]["removed"], rows[0]["kept"]) == ("misinfo", "correct")
    assert (rows[1]["removed"], rows[1]["kept"]) == ("correct", "correct")
    assert "removed" not in rows[2]
    assert rows[3]["no_answer_reason"] == "neither side answers"
    assert all("no_answer_reason" not in row for row in rows[:3] + rows[4:])


@pytest.mark.parametrize("answers, reason", [
    ([None, None], "neither side answers"), (["Paris", None], "one side answers"),
    ([None, "Paris"], "one side answers"), (["Paris", "paris"], "same answer")])
def test_why_a_support_verdict_found_no_two_answers(answers, reason):
    assert crossval.no_answer_reason(answers) == reason


def test_the_tables(toy, capsys):
    run, data = toy
    crossval.main(["removals", str(run), "--data-dir", str(data)])
    out = capsys.readouterr().out
    assert "5 pairs judged in 1 queries" in out
    # columns: the statuses that occur, then the two kinds of removal
    assert "| pairs | no two answers | tied | two subjects | removed the contrary side |" in out
    assert "| correct – noise | 2 | 1 | 1 | 0 | 0 | 0 |" in out
    assert "| all | 5 | 1 | 1 | 1 | 1 | 1 |" in out
    assert "| misinfo | correct | 1 |" in out
    assert "| correct – noise | 1 | 1 | 0 | 0 |" in out  # the pairs with no two answers, by why


def test_the_guard_is_replayed_on_removed_pairs_only_and_resumes(tmp_path, toy, capsys):
    from faithrag.config import Config

    run, data = toy
    records, items = crossval.run_items(str(run), str(data))
    rows = crossval.judged_pairs(records, items)
    out = tmp_path / "guard.jsonl"
    config = Config.load(None, {"llm.backend": "fake"})
    scored = crossval.replay_guard(rows, items, out, config)
    assert [(r["pair"], r["kind"]) for r in scored] == [
        (["m", "c1"], "contrary removed"), (["c1", "c2"], "one of two valid readings removed")]
    assert len(out.read_text().splitlines()) == 2
    out.write_text(out.read_text().replace('"log_odds": ' + str(scored[0]["log_odds"]),
                                           '"log_odds": -0.7', 1))
    again = crossval.replay_guard(rows, items, out, config)
    assert again[0]["log_odds"] == -0.7  # read back, not scored again
    crossval.print_guard(again)
    table = capsys.readouterr().out
    assert "| -0.5 | 1 / 1 (100 % " in table  # the contrary pair at -0.7 is left standing
    assert table.splitlines()[-2].endswith("| 1 | 0 (0 %) |")  # at -0.5 only the wrong one stands


def ranked_passage(pid, relevance, contrary=False):
    return {"pid": pid, "text": f"Passage {pid}.", "relevance": relevance, "is_contrary": contrary}


@pytest.fixture
def write_toy(tmp_path, write_run, write_data_dir):
    def write(rankings):
        """Three items, each: c (contrary), r (relevance 2), s (relevance 1), x (irrelevant)."""
        items = [{"id": f"toy::{i}", "query": f"Question {i}?",
                  "passages": [ranked_passage("c", 0, True), ranked_passage("r", 2), ranked_passage("s", 1),
                               ranked_passage("x", 0)]} for i in range(len(rankings))]
        run = write_run(tmp_path / "run", {"dataset": "toyrank", "kind": "rank",
                                           "method": "none", "model": "fake"},
                        [{"id": f"toy::{i}", "ranking": ranking, "correct": None}
                         for i, ranking in enumerate(rankings)])
        return run, write_data_dir(tmp_path / "data", "toyrank", items)
    return write


def test_removing_the_contrary_passage_lifts_only_the_items_it_led(write_toy):
    # contrary first then the best; contrary first then the second best; already the best first
    run, data = write_toy([["c", "r", "s", "x"], ["c", "s", "r", "x"], ["r", "c", "s", "x"]])
    c = crossval.run_ceiling(str(run), str(data))
    assert c["n"] == 3 and c["contrary@1"] == pytest.approx(2 / 3)
    assert c["ndcg@1"] == pytest.approx(1 / 3)  # 0, 0, 1
    second = (2**1 - 1) / (2**2 - 1)  # nDCG@1 of the relevance-1 passage first
    assert c["ndcg@1_without_contrary"] == pytest.approx((1 + second + 1) / 3)
    assert c["gain"] == pytest.approx((1 + second) / 3)


def test_the_table_has_a_row_per_run(capsys, write_toy):
    run, data = write_toy([["r", "c", "s", "x"]])
    crossval.main(["ceiling", str(run), "--data-dir", str(data)])
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[2].endswith("| 1.000 [1.000, 1.000] | +0.000 |")


def test_rerank_runs_every_reranker_with_its_settings_and_keeps_each_summary(
        tmp_path, fake_executable, capsys):
    faithrag, calls = fake_executable()
    out = str(tmp_path / "rerank")
    assert crossval.main(["rerank", "--sets", "ramdocs_rank", "--rerankers", "none",
                          "crossval:support+guard", "--set", "llm.prefix_cache=true",
                          "--limit", "5", "--offset", "500", "--workers", "2", "--out", out,
                          "--faithrag", faithrag]) == 0
    tail = ["--method", "vanilla", "--answer-top", "3", "--answer-cache", f"{out}/answer-cache",
            "--limit", "5", "--offset", "500", "--model", "default", "--threads", "1",
            "--workers", "2"]
    assert calls() == [
        ["eval", "--plain", "--dataset", "ramdocs_rank", "--set", "llm.prefix_cache=true", *tail, "--out",
         f"{out}/ramdocs_rank-none", "--no-progress"],
        ["eval", "--plain", "--dataset", "ramdocs_rank", "--rerank", "crossval", "--set",
         "rerank.verdict=support", "--set", "rerank.same_subject_check=true", "--set",
         "llm.prefix_cache=true", *tail, "--out", f"{out}/ramdocs_rank-crossval-support-guard",
         "--no-progress"],
        ["report", out, "--out", f"{out}/report"]]
    summary = tmp_path / "rerank" / "ramdocs_rank-crossval-support-guard.summary.json"
    assert summary.read_text() == "output of eval --plain\n"
    assert "ramdocs_rank crossval-support-guard " in capsys.readouterr().out
    timings = (tmp_path / "rerank" / "timings.txt").read_text().splitlines()
    assert [line.rsplit(" ", 1)[0] for line in timings] == [
        "ramdocs_rank none", "ramdocs_rank crossval-support-guard"]

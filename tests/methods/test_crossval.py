import math
import re

import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.explain import render_explanation
from faithrag.llm.base import ChoiceScores
from faithrag.llm.fake import FakeLLM
from faithrag.methods.crossval import SIDE_SYSTEM, VALIDATE_SYSTEM, CrossValidatedReranker
from faithrag.methods.listwise_ranking import PASSAGES_SYSTEM, ListwiseRanker
from faithrag.pipeline import Pipeline
from faithrag.types import Passage, Question, Trace

PASSAGE = re.compile(r'<passage id="(\w+)">\n(.*?)\n</passage>', re.DOTALL)
QUESTION = Question("When did the Aldermoor Bridge open?")


def bridge_passages():
    return [Passage("history", "The Aldermoor Bridge opened in 1887."),
            Passage("blog", "The Aldermoor Bridge opened in 1921."),
            Passage("survey", "The bridge has carried traffic since 1887."),
            Passage("walk", "Walkers cross the bridge, opened 1887, to the mill.")]


class Script:
    """A FakeLLM responder: detection names the first two passages that disagree on the year
    (or None), cross-validation calls false the side whose year fewer reference passages share,
    ranking keeps the prompt order. Every reply can be overridden."""

    def __init__(self, detect=None, validate=None, rank=None):
        self.detect, self.validate, self.rank = detect, validate, rank
        self.seen: dict[str, list[str]] = {"detect": [], "validate": [], "rank": []}

    def __call__(self, request):
        system, user = request.messages[0].content, request.messages[-1].content
        shown = PASSAGE.findall(user)
        if system == PASSAGES_SYSTEM and request.purpose == "detect_conflict":
            self.seen["detect"].append(user)
            if self.detect is not None:
                return self.detect
            years = [(i, re.search(r"1\d{3}", t).group(0)) for i, t in shown]
            for a, ya in years:
                for b, yb in years:
                    if ya != yb:
                        return f"Conflict: [{a}] [{b}]"
            return "Conflict: None"
        if system == SIDE_SYSTEM:  # "support" verdict: the year the one passage gives
            return self.validate if self.validate is not None else (
                f"ANSWER: {re.search(r'1[0-9]{3}', shown[0][1]).group(0)}")
        if system == VALIDATE_SYSTEM:
            self.seen["validate"].append(user)
            if self.validate is not None:
                return self.validate
            year = {i: re.search(r"1\d{3}", t).group(0) for i, t in shown}
            support = {label: sum(year[label] == y for i, y in year.items() if i not in "AB")
                       for label in "AB"}
            false = min("AB", key=lambda label: support[label])
            return f"Reason: {false} disagrees with the other passages.\nFalse passage: {false}"
        assert system == PASSAGES_SYSTEM and request.purpose == "rank"
        self.seen["rank"].append(user)
        return self.rank if self.rank is not None else " > ".join(f"[{i}]" for i, _ in shown)


class SupportJudge(FakeLLM):
    """Yes/no support judged by content: Yes when the passage holds the claimed answer, or
    `always` when set. The same-subject question gets the log-odds `same` (one per order when
    a pair)."""

    def __init__(self, responder, always=None, held=1.5, other=-1.5, same=2.0):
        super().__init__(responder)
        self.always = always
        self.held, self.other = held, other  # log-odds of Yes for a held / an absent answer
        self.same = iter(same) if isinstance(same, tuple) else None
        self.same_default = same
        self.batches = []  # the requests of each score_choices_many call

    def score_choices(self, request):
        self.calls.append(request)
        user = request.messages[-1].content
        if request.purpose == "same_subject":
            odds = next(self.same) if self.same is not None else self.same_default
            return ChoiceScores(request.choices, [odds, 0.0], [1, 1], 10, 0.0)
        answer = re.search(r'the answer to the question is "(.*)"', user).group(1)
        yes = self.always if self.always is not None else answer in PASSAGE.search(user).group(2)
        return ChoiceScores(request.choices, [self.held if yes else self.other, 0.0], [1, 1],
                            10, 0.0)

    def score_choices_many(self, requests):
        self.batches.append([(r.purpose, r.messages[-1].content) for r in requests])
        return [self.score_choices(r) for r in requests]


def crossval(script, max_rounds=2, window=20, step=10, both_orders=True, verdict="pairwise",
             llm=None, **options):
    llm = llm or FakeLLM(script)
    return CrossValidatedReranker(llm, ListwiseRanker(llm, window=window, step=step),
                                  max_rounds=max_rounds, both_orders=both_orders,
                                  verdict=verdict, **options), llm


def test_conflict_found_removes_the_false_side_with_its_reason():
    script = Script()
    reranker, _ = crossval(script)
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert [r.passage.id for r in result.removed] == ["blog"]
    reason = result.removed[0].reason
    assert "conflicts with history" in reason and "disagrees with the other passages" in reason
    assert [p.id for p in result.passages] == ["history", "survey", "walk"]
    names = [s.name for s in trace.steps]
    assert names == ["crossval.detect", "crossval.validate", "crossval.detect", "crossval.rank"]
    detect, validate = trace.steps[0], trace.steps[1]
    assert detect.outputs["pair"] == ["history", "blog"]
    assert validate.outputs["false"] == "blog" and validate.outputs["kept"] == "history"
    assert validate.decision == "removed blog (kept history)"
    assert trace.steps[2].decision == "no conflict"
    assert trace.steps[-1].outputs["removed"] == [["blog", reason]]
    # the pair is shown as A and B beside the references, which keep numeric ids
    assert [i for i, _ in PASSAGE.findall(script.seen["validate"][0])] == ["A", "B", "1", "2"]


def test_verdict_a_removes_the_higher_ranked_side():
    script = Script(validate="Reason: A contradicts the survey.\nFalse passage: A")
    reranker, _ = crossval(script, max_rounds=1, both_orders=False)
    result = reranker.rerank(QUESTION, bridge_passages(), Trace())
    assert [r.passage.id for r in result.removed] == ["history"]
    assert "conflicts with blog" in result.removed[0].reason


def test_no_conflict_removes_nothing():
    script = Script(detect="Conflict: None")
    reranker, llm = crossval(script)
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert result.removed == [] and len(result.passages) == 4
    assert [s.name for s in trace.steps] == ["crossval.detect", "crossval.rank"]
    assert script.seen["validate"] == [] and len(llm.calls) == 2
    # the final ranking was requested beside the detection, sharing its prompt prefix, and used
    detect, rank = llm.calls
    assert [c.purpose for c in trace.steps[0].llm_calls] == ["detect_conflict", "rank"]
    assert trace.steps[1].llm_calls == [] and "reply" in trace.steps[1].outputs
    assert detect.messages[0] == rank.messages[0]
    shared = detect.messages[1].content.split("</passage>\n\n")[0]
    assert rank.messages[1].content.startswith(shared) and shared.count("<passage") == 4


def test_rounds_are_bounded():
    always = Script(detect="Conflict: [1] [2]",
                    validate="Reason: B is odd.\nFalse passage: B")
    reranker, _ = crossval(always, max_rounds=2, both_orders=False)
    passages = [Passage(f"p{i}", f"Passage {i} says 1887.") for i in range(6)]
    trace = Trace()
    result = reranker.rerank(QUESTION, passages, trace)
    assert [r.passage.id for r in result.removed] == ["p1", "p2"]
    assert len(always.seen["detect"]) == 2
    assert len(trace.steps[-1].llm_calls) == 1  # passages changed since the last detection
    assert sorted(p.id for p in result.passages + [r.passage for r in result.removed]) == \
        sorted(p.id for p in passages)

    zero = Script()
    reranker, _ = crossval(zero, max_rounds=0)
    assert reranker.rerank(QUESTION, bridge_passages(), Trace()).removed == []
    assert zero.seen["detect"] == [] and len(zero.seen["rank"]) == 1


def test_both_orders_remove_only_what_both_verdicts_name():
    script = Script()  # judges by content: the blog is false in either order
    reranker, _ = crossval(script)
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert [r.passage.id for r in result.removed] == ["blog"]
    validate = trace.steps[1]
    assert [c.purpose for c in validate.llm_calls] == ["cross_validate"] * 2
    assert validate.outputs["verdicts"] == ["B", "A"]  # (history, blog) then (blog, history)
    first, second = script.seen["validate"][:2]
    assert first.index("opened in 1887") < first.index("opened in 1921")
    assert second.index("opened in 1921") < second.index("opened in 1887")

    biased = Script(validate="Reason: A looks wrong.\nFalse passage: A")  # A whatever A is
    reranker, _ = crossval(biased, max_rounds=2)
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert result.removed == []
    assert trace.steps[1].outputs["status"] == "inconsistent"
    assert "order" in trace.steps[1].decision
    assert "checked and do not conflict" in biased.seen["detect"][1]


def test_validation_can_overrule_a_false_detection_and_detection_goes_on():
    replies = iter(["Conflict: [1] [3]", "Conflict: [1] [2]"])
    verdicts = iter(["Reason: both say 1887.\nFalse passage: None",
                     "Reason: B says 1921.\nFalse passage: B"])

    class Overruled(Script):
        def __call__(self, request):
            if request.purpose == "detect_conflict":
                self.seen["detect"].append(request.messages[-1].content)
                return next(replies)
            if request.purpose == "cross_validate":
                return next(verdicts)
            return super().__call__(request)

    script = Overruled()
    reranker, _ = crossval(script, max_rounds=2, both_orders=False)
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert [r.passage.id for r in result.removed] == ["blog"]
    assert trace.steps[1].decision == "no real conflict: nothing removed"
    assert trace.steps[1].outputs["status"] == "none"
    assert "checked and do not conflict: [1] [3]" in script.seen["detect"][1]
    assert "checked" not in script.seen["detect"][0]


def test_a_pair_found_consistent_and_named_again_ends_the_rounds():
    script = Script(detect="Conflict: [3] [1]",
                    validate="Reason: both say 1887.\nFalse passage: None")
    reranker, _ = crossval(script, max_rounds=3, both_orders=False)
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert result.removed == [] and len(script.seen["detect"]) == 2
    assert len(script.seen["validate"]) == 1
    assert "already found consistent" in trace.steps[2].decision


def test_every_detection_marks_the_question_and_passages_as_its_recurring_prefix():
    script = Script(detect="Conflict: [3] [1]",
                    validate="Reason: both say 1887.\nFalse passage: None")
    reranker, llm = crossval(script, max_rounds=3, both_orders=False)
    reranker.rerank(QUESTION, bridge_passages(), Trace())
    first, second = [r for r in llm.calls if r.purpose == "detect_conflict"]
    assert first.cache_prefix == second.cache_prefix == 1
    assert first.cache_prefix_text == second.cache_prefix_text  # the second round reuses it
    head = first.cache_prefix_text
    assert "Aldermoor" in head and head.count("<passage") == 4 and "Conflict" not in head
    assert "checked and do not conflict" in second.messages[1].content[len(head):]


def test_a_round_needs_a_reference_passage_beyond_the_pair():
    always = Script(detect="Conflict: [1] [2]",
                    validate="Reason: B is odd.\nFalse passage: B")
    reranker, _ = crossval(always, max_rounds=5, both_orders=False)
    passages = [Passage(f"p{i}", f"Passage {i} says 1887.") for i in range(3)]
    result = reranker.rerank(QUESTION, passages, Trace())
    assert [r.passage.id for r in result.removed] == ["p1"]  # two left: no majority to ask
    assert len(always.seen["detect"]) == 1


@pytest.mark.parametrize("override", [{"detect": "Passages one and two, maybe."},
                                      {"validate": "Reason: hard to say.\nFalse passage: A or B"}])
def test_unreadable_replies_remove_nothing_and_are_counted(override):
    script = Script(**override)
    reranker, _ = crossval(script)
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert result.removed == [] and len(result.passages) == 4
    failed = [s for s in trace.steps if s.outputs.get("parse", {}).get("failed")]
    assert len(failed) == 1 and "unreadable" in failed[0].decision
    assert trace.steps[-1].name == "crossval.rank"
    assert trace.steps[-1].llm_calls == []  # nothing removed: the ranking made with detection


def test_detection_sees_only_the_first_window_and_ranking_slides():
    script = Script(detect="Conflict: None")
    reranker, _ = crossval(script, window=4, step=2)
    passages = [Passage(f"p{i}", f"Passage {i} says 1887.") for i in range(7)]
    result = reranker.rerank(QUESTION, passages, Trace())
    assert len(PASSAGE.findall(script.seen["detect"][0])) == 4
    assert len(script.seen["rank"]) == 3  # spans (3,7), (1,5), (0,3)
    assert [p.id for p in result.passages] == [p.id for p in passages]


def test_config_registry_pipeline_and_explanation_show_the_removal():
    config = Config.load(None, {"llm.backend": "fake", "pipeline.rerank": "crossval",
                                "rerank.max_rounds": 1})
    answers = FakeLLM(lambda request: "1887")
    pipeline = Pipeline(registry.build("generator", "vanilla", answers, config),
                        reranker=registry.build("reranker", "crossval", FakeLLM(Script()), config))
    result = pipeline.run(QUESTION, bridge_passages())
    assert [p.id for p in result.passages] == ["history", "survey", "walk"]
    assert "1921" not in answers.calls[0].messages[-1].content
    assert result.to_dict()["removed"][0]["id"] == "blog"
    text = render_explanation(result)
    assert "removed blog: conflicts with history" in text
    assert "rerank/crossval.validate" in text


def test_support_verdict_removes_the_side_the_other_passages_do_not_support():
    script = Script()
    reranker, _ = crossval(script, verdict="support", llm=SupportJudge(script))
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert [r.passage.id for r in result.removed] == ["blog"]
    assert '"1887" (2 of 2) over "1921" (0 of 2)' in result.removed[0].reason
    validate = trace.steps[1]
    assert validate.outputs["answers"] == ["1887", "1921"]
    assert validate.outputs["votes"] == [2, 0]
    assert [c.purpose for c in validate.llm_calls] == ["side_answer"] * 2 + ["support_judge"] * 4
    assert script.seen["validate"] == []  # the pairwise prompt is not used
    assert [p.id for p in result.passages] == ["history", "survey", "walk"]


def test_support_verdict_scores_its_claims_in_one_call_a_passages_two_claims_together():
    script = Script()
    judge = SupportJudge(script)
    reranker, _ = crossval(script, max_rounds=1, verdict="support", llm=judge)
    reranker.rerank(QUESTION, bridge_passages(), Trace())
    [batch] = judge.batches
    passages = [PASSAGE.search(user).group(2) for _, user in batch]
    claims = [re.search(r'is "(.*)"', user).group(1) for _, user in batch]
    assert {purpose for purpose, _ in batch} == {"support_judge"}
    assert claims == ["1887", "1921"] * 2
    assert passages[0] == passages[1] != passages[2] == passages[3]


@pytest.mark.parametrize("replies, always, status", [
    (["ANSWER: 1887", "ANSWER: 1887."], None, "none"),  # same answer: no conflict on the question
    (["ANSWER: NOT STATED", "ANSWER: 1921"], None, "none"),
    (["ANSWER: 1887", "ANSWER: 1921"], True, "tied"),  # every passage supports both
    (["???", "ANSWER: 1921"], None, "failed"),
])
def test_support_verdict_removes_nothing_when_undecided(replies, always, status):
    answers = iter(replies)

    class Sides(Script):
        def __call__(self, request):
            if request.messages[0].content == SIDE_SYSTEM:
                return next(answers)
            return super().__call__(request)

    script = Sides()
    reranker, _ = crossval(script, max_rounds=1, verdict="support",
                           llm=SupportJudge(script, always))
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert result.removed == [] and len(result.passages) == 4
    assert trace.steps[1].outputs["status"] == status
    assert trace.steps[1].decision


@pytest.mark.parametrize("margin, removed", [(1.0, []), (0.3, ["blog"])])
def test_a_support_vote_needs_a_log_odds_lead_of_the_margin(margin, removed):
    """Low, uncalibrated P(yes) as on the 1.5B model: 0.45 for the held answer, 0.35 for the
    other (log-odds -0.2 vs -0.6). Only the lead counts, not P(yes) > 0.5."""
    script = Script()
    reranker, _ = crossval(script, max_rounds=1, verdict="support", support_margin=margin,
                           llm=SupportJudge(script, held=-0.2, other=-0.6))
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert [r.passage.id for r in result.removed] == removed
    assert all(p < 0.5 for ps in trace.steps[1].outputs["p_yes"].values() for p in ps)


@pytest.mark.parametrize("verdict", ["pairwise", "support"])
def test_same_subject_check_leaves_a_pair_about_two_subjects_standing(verdict):
    script = Script()
    reranker, llm = crossval(script, max_rounds=1, verdict=verdict, same_subject_check=True,
                             llm=SupportJudge(script, same=-2.0))
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert result.removed == [] and len(result.passages) == 4
    validate = trace.steps[1]
    assert validate.outputs["status"] == "ambiguous"
    assert validate.outputs["same_subject"] == pytest.approx(0.119, abs=1e-3)
    assert "different subjects" in validate.decision
    assert script.seen["validate"] == []  # no verdict is asked for
    # both orders: A and B swap between the two requests
    asked = [c for c in llm.calls if getattr(c, "purpose", None) == "same_subject"]
    firsts = [PASSAGE.findall(c.messages[-1].content)[0][1] for c in asked]
    assert firsts == ["The Aldermoor Bridge opened in 1887.",
                      "The Aldermoor Bridge opened in 1921."]


@pytest.mark.parametrize("verdict", ["pairwise", "support"])
def test_same_subject_check_lets_a_pair_about_one_subject_be_judged(verdict):
    script = Script()
    reranker, _ = crossval(script, max_rounds=1, verdict=verdict, same_subject_check=True,
                           llm=SupportJudge(script, same=2.0))
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert [r.passage.id for r in result.removed] == ["blog"]
    assert trace.steps[1].outputs["status"] == "ok"


@pytest.mark.parametrize("threshold, removed", [(0.0, ["blog"]), (1.5, [])])
def test_same_subject_log_odds_are_averaged_over_both_orders(threshold, removed):
    """+3 in one order and -1 in the other average to +1: the position preference cancels."""
    script = Script()
    reranker, _ = crossval(script, max_rounds=1, verdict="support", same_subject_check=True,
                           same_subject_threshold=threshold,
                           llm=SupportJudge(script, same=(3.0, -1.0)))
    result = reranker.rerank(QUESTION, bridge_passages(), Trace())
    assert [r.passage.id for r in result.removed] == removed


def test_support_verdict_asks_the_subject_only_when_the_answers_differ():
    class Agreeing(Script):
        def __call__(self, request):
            if request.messages[0].content == SIDE_SYSTEM:
                return "ANSWER: 1887"
            return super().__call__(request)

    script = Agreeing()
    reranker, _ = crossval(script, max_rounds=1, verdict="support", same_subject_check=True,
                           llm=SupportJudge(script))
    trace = Trace()
    reranker.rerank(QUESTION, bridge_passages(), trace)
    assert trace.steps[1].outputs["status"] == "none"
    assert "same_subject" not in [c.purpose for c in trace.steps[1].llm_calls]


def test_same_subject_check_is_off_by_default_and_set_by_config():
    script = Script()
    default = registry.build("reranker", "crossval", SupportJudge(script),
                             Config.load(None, {"llm.backend": "fake"}))
    assert default.same_subject_check is False
    config = Config.load(None, {"llm.backend": "fake", "rerank.same_subject_check": True,
                                "rerank.same_subject_threshold": -0.5})
    reranker = registry.build("reranker", "crossval", SupportJudge(script), config)
    assert reranker.same_subject_check is True and reranker.same_subject_threshold == -0.5


def test_support_verdict_is_chosen_by_config_and_checked():
    config = Config.load(None, {"llm.backend": "fake", "rerank.verdict": "support"})
    script = Script()
    reranker = registry.build("reranker", "crossval", SupportJudge(script), config)
    assert reranker.verdict == "support"
    with pytest.raises(ValueError, match="verdict"):
        CrossValidatedReranker(FakeLLM(), ListwiseRanker(FakeLLM()), verdict="vote")
    with pytest.raises(Exception, match="verdict"):
        Config.load(None, {"rerank.verdict": "vote"})


@pytest.mark.model
@pytest.mark.parametrize("verdict", ["pairwise", "support"])
def test_tiny_model_end_to_end_returns_a_permutation_minus_removed(tiny_gguf, verdict):
    from faithrag.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM("tiny", n_ctx=2048, n_threads=1)
    try:
        reranker = CrossValidatedReranker(llm, ListwiseRanker(llm, window=3, step=1),
                                          max_rounds=1, passage_tokens=64, reason_tokens=48,
                                          verdict=verdict)
        passages = bridge_passages()
        trace = Trace()
        result = reranker.rerank(QUESTION, passages, trace)
    finally:
        llm.close()
    kept = [p.id for p in result.passages]
    dropped = [r.passage.id for r in result.removed]
    assert len(set(kept)) == len(kept) and not set(kept) & set(dropped)
    assert sorted(kept + dropped) == sorted(p.id for p in passages)
    assert all(r.reason for r in result.removed)
    assert trace.steps[-1].name == "crossval.rank" and trace.totals()["llm_calls"] >= 2
    validate = [s for s in trace.steps if s.name == "crossval.validate"]
    assert all(s.inputs["verdict"] == verdict and s.outputs["status"] for s in validate)


@pytest.mark.model
def test_tiny_model_support_verdict_scores_every_reference_passage(tiny_gguf):
    """The tiny model rarely names a readable pair, so the verdict is called directly."""
    from faithrag.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM("tiny", n_ctx=2048, n_threads=1)
    try:
        reranker = CrossValidatedReranker(llm, ListwiseRanker(llm), verdict="support")
        history, blog, *others = bridge_passages()
        with Trace().step("rerank", "crossval.validate") as step:
            status, verdict = reranker.support_verdict(QUESTION, history, blog, others, step)
    finally:
        llm.close()
    assert status in ("ok", "none", "tied", "failed")
    assert (verdict is not None) == (status == "ok")
    assert len(step.outputs["raw"]) == 2
    if "p_yes" in step.outputs:  # two different answers were read: every reference was scored
        assert set(step.outputs["p_yes"]) == {p.id for p in others}
        assert all(0 <= p <= 1 for pair in step.outputs["p_yes"].values() for p in pair)
        assert [c.purpose for c in step.llm_calls].count("support_judge") == 2 * len(others)


@pytest.mark.model
def test_tiny_model_same_subject_scores_the_pair_in_both_orders(tiny_gguf):
    from faithrag.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM("tiny", n_ctx=2048, n_threads=1)
    try:
        reranker = CrossValidatedReranker(llm, ListwiseRanker(llm), same_subject_check=True)
        history, blog, *_ = bridge_passages()
        with Trace().step("rerank", "crossval.validate") as step:
            odds = reranker.same_subject(QUESTION, history, blog, step)
    finally:
        llm.close()
    assert math.isfinite(odds)
    assert [c.purpose for c in step.llm_calls] == ["same_subject"] * 2


def test_a_no_conflict_reply_with_ids_removes_nothing():
    def respond(request):
        if request.messages[0].content == VALIDATE_SYSTEM:
            return "Reason: B is less detailed.\nFalse passage: B"
        if request.purpose == "detect_conflict":
            return "No conflict: [1] and [2] both say 1887."
        return "[1] > [2] > [3]"

    llm = FakeLLM(respond)
    reranker = CrossValidatedReranker(llm, ListwiseRanker(llm), both_orders=False)
    passages = [Passage("a", "The bridge opened in 1887."), Passage("b", "Opened 1887."),
                Passage("c", "The bridge, opened 1887, crosses the river.")]
    assert reranker.rerank(Question("When did the bridge open?"), passages, Trace()).removed == []


def test_first_stage_order_keeps_the_incoming_order_and_makes_no_ranking_call():
    # the ranking reply would reverse the passages; with first_stage it is never asked for
    script = Script(rank="[3] > [2] > [1]")
    reranker, llm = crossval(script, final_order="first_stage")
    trace = Trace()
    result = reranker.rerank(QUESTION, bridge_passages(), trace)
    assert [r.passage.id for r in result.removed] == ["blog"]
    assert [p.id for p in result.passages] == ["history", "survey", "walk"]
    assert script.seen["rank"] == []
    assert all(r.purpose != "rank" for r in llm.calls)
    assert trace.steps[-1].decision == "removed 1, kept in the first-stage order 3"


def test_the_listwise_final_order_is_the_default_and_others_are_refused():
    script = Script(rank="[3] > [2] > [1]")
    reranker, _ = crossval(script)
    assert [p.id for p in reranker.rerank(QUESTION, bridge_passages(), Trace()).passages] == [
        "walk", "survey", "history"]
    with pytest.raises(ValueError, match="final_order"):
        crossval(script, final_order="bm25")
    config = Config.load(None, {"llm.backend": "fake", "rerank.final_order": "first_stage"})
    assert registry.build("reranker", "crossval", FakeLLM(script), config).final_order == "first_stage"


# ------------------------------------------------------------------ conflict report

def checks(trace):
    return [(c.kind, c.status) for c in trace.checks]


def test_a_removal_is_reported_as_a_passage_conflict_with_the_pair_as_sides():
    reranker, _ = crossval(Script())
    trace = Trace()
    reranker.rerank(QUESTION, bridge_passages(), trace)
    (conflict,) = trace.conflicts
    assert (conflict.kind, conflict.stage, conflict.action) == (
        "passage_vs_passage", "crossval", "removed")
    assert [s.passages for s in conflict.sides] == [["history"], ["blog"]]
    # the pairwise verdict reads no answers: none is invented, each side quotes its passage
    assert [s.answer for s in conflict.sides] == ["", ""]
    assert [s.quote for s in conflict.sides] == ["The Aldermoor Bridge opened in 1887.",
                                                "The Aldermoor Bridge opened in 1921."]
    assert "blog removed" in conflict.note
    # round 1 found and removed it; round 2's detection found nothing
    assert checks(trace) == [("passage_vs_passage", "conflict"),
                             ("passage_vs_passage", "no_conflict")]


def test_the_support_verdict_gives_each_side_its_answer():
    script = Script()
    reranker, _ = crossval(script, max_rounds=1, verdict="support", llm=SupportJudge(script))
    trace = Trace()
    reranker.rerank(QUESTION, bridge_passages(), trace)
    (conflict,) = trace.conflicts
    assert [(s.answer, s.passages) for s in conflict.sides] == [("1887", ["history"]),
                                                                ("1921", ["blog"])]


def test_a_pair_left_standing_is_kept_and_one_about_two_subjects_is_ambiguous():
    biased = Script(validate="Reason: A looks wrong.\nFalse passage: A")
    reranker, _ = crossval(biased, max_rounds=1)
    trace = Trace()
    reranker.rerank(QUESTION, bridge_passages(), trace)
    assert [(c.kind, c.action) for c in trace.conflicts] == [("passage_vs_passage", "kept")]

    script = Script()
    reranker, _ = crossval(script, max_rounds=1, same_subject_check=True,
                           llm=SupportJudge(script, same=-2.0))
    trace = Trace()
    reranker.rerank(QUESTION, bridge_passages(), trace)
    assert [(c.kind, c.action) for c in trace.conflicts] == [("ambiguous", "kept")]
    assert checks(trace) == [("ambiguous", "conflict")]


def test_a_dismissed_pair_is_no_conflict_and_an_unread_detection_could_not_tell():
    script = Script(detect="Conflict: [3] [1]",
                    validate="Reason: both say 1887.\nFalse passage: None")
    reranker, _ = crossval(script, max_rounds=1, both_orders=False)
    trace = Trace()
    reranker.rerank(QUESTION, bridge_passages(), trace)
    assert trace.conflicts == []
    assert checks(trace) == [("passage_vs_passage", "no_conflict")]

    reranker, _ = crossval(Script(detect="Passages one and two, maybe."))
    trace = Trace()
    reranker.rerank(QUESTION, bridge_passages(), trace)
    assert trace.conflicts == []
    assert checks(trace) == [("passage_vs_passage", "could_not_tell")]
    assert registry.stage("reranker", "crossval").reports_conflicts

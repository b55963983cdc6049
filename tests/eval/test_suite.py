import json

import pytest

from faithrag import FakeLLM
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval import suite
from faithrag.eval.suite_slices import SLICES, SliceSpec, SuiteItem
from faithrag.types import Passage, Question


def reads_passage(rules: dict[str, str], default: str = "NOT_IN_PASSAGE"):
    """The detector's per-passage readings answer by the passage quoted after the passages;
    every other request (the plain answer, memory) gets `default`."""
    def respond(request):
        user = request.messages[-1].content
        tail = user.rsplit("</passage>", 1)[-1] if request.purpose == "passage_answer" else user
        return next((reply for pattern, reply in rules.items() if pattern in tail), default)
    return respond


def different_subjects(score_choices):
    """No to "do the passages speak of the same subject"."""
    def score(request):
        scores = score_choices(request)
        return type(scores)(scores.choices, [-3.0, 0.0], scores.token_counts,
                            scores.prompt_tokens, scores.seconds)
    return score


def toy_items():
    return [
        SuiteItem("toy_conflict", "two", Question("Who did thing two?", "two"),
                  [Passage("two#c0", "Mutemath did thing two."),
                   Passage("two#c1", "Coldplay did thing two.")],
                  ["Mutemath", "Coldplay"], ["The Beatles"], all_golds=True),
        SuiteItem("toy_clean", "one", Question("Who did thing one?", "one"),
                  [Passage("one#c0", "Mutemath did thing one.")], ["Mutemath"]),
        SuiteItem("toy_clean", "three", Question("Who did thing three?", "three"),
                  [Passage("three#c0", "Mutemath did thing three.")], ["Mutemath"]),
    ]


@pytest.fixture
def toy_slices(monkeypatch):
    items = toy_items()
    monkeypatch.setitem(SLICES, "toy_conflict", SliceSpec(
        "conflict", lambda data_dir: [i for i in items if i.slice == "toy_conflict"]))
    monkeypatch.setitem(SLICES, "toy_clean", SliceSpec(
        "clean", lambda data_dir: [i for i in items if i.slice == "toy_clean"]))
    return ["toy_conflict", "toy_clean"]


@pytest.fixture
def llm():
    fake = FakeLLM(reads_passage({"Mutemath did": "Mutemath", "Coldplay did": "Coldplay"},
                                 default="Mutemath"))
    fake.score_choices = different_subjects(fake.score_choices)
    return fake


def config():
    return Config.load(None, {"llm.backend": "fake"})


def test_each_item_is_answered_both_ways_on_the_same_passages(tmp_path, toy_slices, llm):
    records = suite.run_suite(config(), tmp_path, slices=toy_slices, llms={"plain": llm,
                                                                          "pipeline": llm})
    by_id = {r["id"]: r for r in records}
    assert set(by_id) == {f"{s}/{i}/{way}" for s, i in (("toy_conflict", "two"),
                                                         ("toy_clean", "one"),
                                                         ("toy_clean", "three"))
                          for way in suite.WAYS}
    plain, piped = by_id["toy_conflict/two/plain"], by_id["toy_conflict/two/pipeline"]
    assert plain["passages"] == piped["passages"] == ["two#c0", "two#c1"]
    # plain RAG answers one reading; the default pipeline reports the conflict and surfaces both
    assert plain["answer"] == "Mutemath" and not plain["surfaced"] and plain["conflicts"] == []
    assert piped["surfaced"] and piped["conflicts"] == ["passage_vs_passage"]
    assert "Mutemath (per [two#c0])" in piped["answer"] and "Coldplay" in piped["answer"]
    assert piped["resolved_answer"] == plain["answer"]
    assert (plain["correct"], piped["correct"], piped["informed"]) == (False, True, True)
    assert plain["attacked"] is None and plain["kind"] == "conflict"
    clean = by_id["toy_clean/one/pipeline"]
    assert clean["correct"] and not clean["surfaced"] and clean["kind"] == "clean"
    # every passage holds the answer: the detector reads none and asks nothing closed-book
    assert by_id["toy_clean/one/plain"]["llm_calls"] == 1 == clean["llm_calls"]
    assert piped["llm_calls"] > 1
    manifest = json.loads((tmp_path / "suite.json").read_text())
    assert manifest["configs"]["plain"]["pipeline"]["detect"] is None
    assert manifest["configs"]["pipeline"]["pipeline"]["detect"] == "conflicts"
    assert manifest["configs"]["pipeline"]["use_cache"] is False


def test_a_rerun_resumes_and_other_settings_are_refused(tmp_path, toy_slices, llm):
    suite.run_suite(config(), tmp_path, slices=toy_slices, llms={"plain": llm, "pipeline": llm},
                    limit=1)
    assert len(suite.read_records(tmp_path)) == 2
    suite.run_suite(config(), tmp_path, slices=toy_slices, llms={"plain": llm, "pipeline": llm})
    calls = len(llm.calls)
    assert len(suite.run_suite(config(), tmp_path, slices=toy_slices,
                               llms={"plain": llm, "pipeline": llm})) == 6
    assert len(llm.calls) == calls  # nothing ran again
    faster = Config.load(None, {"llm.backend": "fake", "llm.n_threads": 1})
    assert len(suite.run_suite(faster, tmp_path, slices=toy_slices,
                               llms={"plain": llm, "pipeline": llm})) == 6  # speed only
    with pytest.raises(ConfigError, match="configs"):
        suite.run_suite(Config.load(None, {"llm.backend": "fake",
                                           "conflicts.subject_coverage": 0.9}), tmp_path, slices=toy_slices, llms={"plain": llm, "pipeline": llm})
    with pytest.raises(ConfigError, match="per_slice"):
        suite.run_suite(config(), tmp_path, slices=toy_slices, per_slice=1,
                        llms={"plain": llm, "pipeline": llm})


def test_shards_split_the_items_and_share_one_record_file(tmp_path, toy_slices, llm):
    first = suite.run_suite(config(), tmp_path, slices=toy_slices, shard=(1, 2),
                            llms={"plain": llm, "pipeline": llm})
    mine = {r["item"] for r in first}
    assert len(mine) == 2 and len(first) == 4  # items 1 and 3 of the three
    both = suite.run_suite(config(), tmp_path, slices=toy_slices, shard=(2, 2),
                           llms={"plain": llm, "pipeline": llm})
    assert len(both) == 6 and {r["item"] for r in both} - mine == {"one", "two", "three"} - mine
    with pytest.raises(ConfigError, match="--shard"):
        suite.run_suite(config(), tmp_path, slices=toy_slices, shard=(3, 2))


def test_a_failing_run_is_recorded_never_scored_and_retried(tmp_path, toy_slices):
    def broken(request):
        raise RuntimeError("server gone")

    dead = FakeLLM(broken)
    records = suite.run_suite(config(), tmp_path, slices=toy_slices[1:], limit=1,
                              llms={"plain": dead, "pipeline": dead})
    assert {r["parse_status"] for r in records} == {"error"}
    assert all("correct" not in r and "server gone" in r["error"] for r in records)
    good = FakeLLM(default="Mutemath")
    records = suite.run_suite(config(), tmp_path, slices=toy_slices[1:], limit=1,
                              llms={"plain": good, "pipeline": good})
    assert {r["parse_status"] for r in records} == {"ok"} and all(r["correct"] for r in records)


def test_unknown_suites_and_slices_are_refused_before_anything_loads(tmp_path):
    def no_model(config):
        raise AssertionError("loaded a model")

    with pytest.raises(ConfigError, match="Unknown suite"):
        suite.run_suite(config(), tmp_path, suite="other", load=no_model)
    with pytest.raises(ConfigError, match="--slices") as caught:
        suite.run_suite(config(), tmp_path, slices=["ramdocs", "nope"], load=no_model)
    assert "nope" in str(caught.value)


def test_a_flagged_answer_is_scored_as_the_answer_it_keeps(tmp_path, toy_slices, llm):
    flag = Config.load(None, {"llm.backend": "fake", "pipeline.on_conflict": "flag"})
    records = suite.run_suite(flag, tmp_path, slices=["toy_conflict"],
                              llms={"plain": llm, "pipeline": llm})
    piped = next(r for r in records if r["way"] == "pipeline")
    assert piped["answer"] == "Mutemath — the sources disagree ([two#c1])"
    assert not piped["surfaced"] and piped["flagged"]
    assert (piped["correct"], piped["informed"]) == (False, False)


def test_informed_credits_a_wrong_answer_only_as_a_surfaced_reading():
    item = SuiteItem("kre_squad_hostile", "x", Question("How much?"), [], ["200,000 krone"],
                     ["300,000 krone"])

    class Answer:
        def __init__(self, text, meta=None):
            self.text, self.choice_index, self.meta = text, None, meta or {}

    class Result:
        def __init__(self, answer):
            self.answer = answer

    both = "200,000 krone (per [a]); 300,000 krone (per [b]) — the sources disagree"
    assert suite.score(item, Result(Answer(both, {"readings_listed": True}))) == {
        "correct": False, "informed": True, "attacked": True, "surfaced": True, "flagged": False}
    assert suite.score(item, Result(Answer("200,000 krone or 300,000 krone"))) == {
        "correct": False, "informed": False, "attacked": True, "surfaced": False,
        "flagged": False}
    assert suite.score(item, Result(Answer("200,000 krone")))["correct"]
    # a flagged answer is scored on the reading it keeps, not on the ids it names
    flagged = Answer("200,000 — the sources disagree ([kre::300])",
                     {"conflicts": [0], "resolved_answer": "200,000", "readings_listed": False})
    assert suite.score(item, Result(flagged)) == {
        "correct": True, "informed": True, "attacked": False, "surfaced": False,
        "flagged": True}


def test_skip_runs_a_second_sample_disjoint_from_the_first(tmp_path, toy_slices, llm):
    first = suite.run_suite(config(), tmp_path / "first", slices=toy_slices, per_slice=1,
                            llms={"plain": llm, "pipeline": llm})
    second = suite.run_suite(config(), tmp_path / "second", slices=toy_slices, per_slice=2,
                             skip=1, llms={"plain": llm, "pipeline": llm})
    # toy_conflict holds one item, all in the first sample; toy_clean gives one more
    assert {r["item"] for r in second} == {"one", "three"} - {r["item"] for r in first}
    assert json.loads((tmp_path / "second" / suite.MANIFEST).read_text())["skip"] == 1
    with pytest.raises(ConfigError, match="--skip"):
        suite.run_suite(config(), tmp_path / "third", slices=toy_slices, per_slice=2, skip=2)

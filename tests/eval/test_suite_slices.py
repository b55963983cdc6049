import os
from pathlib import Path

import pytest

from faithrag.errors import ConfigError
from faithrag.eval import suite_slices
from faithrag.eval.datasets import DATA_DIR_ENV, RankItem, RankPassage
from faithrag.eval.suite_slices import (
    SLICES,
    SuiteItem,
    check_slices,
    gold_given,
    passage_window,
    sample_items,
    strict_correct,
    wrong_given,
)
from faithrag.types import Question

SHARED = Path(os.environ.get(DATA_DIR_ENV) or Path(__file__).resolve().parents[3] / "shared"
              / "data")


def item(golds, wrongs=(), all_golds=False, gold_index=None):
    return SuiteItem("s", "i", Question("q?"), [], list(golds), list(wrongs), all_golds,
                     gold_index)


def test_strict_needs_every_gold_and_no_wrong_answer():
    assert strict_correct("Mutemath and Coldplay", ["Mutemath", "Coldplay"], ["The Beatles"])
    assert not strict_correct("Mutemath", ["Mutemath", "Coldplay"], [])
    assert not strict_correct("Mutemath, Coldplay, The Beatles", ["Mutemath", "Coldplay"],
                              ["The Beatles"])
    assert not strict_correct("anything", [], [])


def test_one_gold_is_enough_unless_all_are_needed_and_numbers_compare_by_value():
    assert gold_given(item(["1887", "eighteen eighty-seven"]), "It opened in 1887.", None)
    assert not gold_given(item(["1887", "May"], all_golds=True), "It opened in 1887.", None)
    assert gold_given(item(["8,849 metres"]), "about 8849 m", None)
    assert wrong_given(item(["200,000 krone"], ["300,000 krone"]), "300000 krone")


def test_yes_no_texts_match_whole_answers_only():
    assert not wrong_given(item(["yes"], ["no"]), "Yes, and no other film won.")
    assert wrong_given(item(["yes"], ["no"]), "No.")


def test_multiple_choice_is_scored_by_the_option_picked():
    mc = item(["research"], gold_index=3)
    assert gold_given(mc, "distribution", 3) and not gold_given(mc, "research", 0)
    assert not wrong_given(mc, "anything")


def test_the_window_holds_both_sides_of_the_conflict():
    passages = [RankPassage(f"p{i}", f"text {i}", 0, role="distractor") for i in range(6)]
    passages[4] = RankPassage("p4", "reference", 2, role="reference")
    passages[5] = RankPassage("p5", "contrary", 0, is_contrary=True, role="contrary")
    window = passage_window(RankItem("r", "src", "q?", passages), 3)
    assert [p.id for p in window] == ["p0", "p4", "p5"]
    no_contrary = RankItem("r", "src", "q?", passages[:5])
    assert passage_window(no_contrary, 3) is None


def test_unknown_slices_are_refused_with_the_list():
    with pytest.raises(ConfigError, match="nope") as caught:
        check_slices(["ramdocs", "nope"])
    assert "kre_passages" in caught.value.hint
    assert check_slices(["ramdocs", "ramdocs"]) == ["ramdocs"]


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared data not present ({SHARED})")
def test_the_suite_on_the_shared_data_is_seeded_untuned_and_a_third_clean():
    items = sample_items(list(SLICES), 30, 0, str(SHARED))
    assert len(items) >= 300
    kinds = [SLICES[i.slice].kind for i in items]
    assert kinds.count("clean") >= len(items) / 3
    assert [i.id for i in sample_items(list(SLICES), 30, 0, str(SHARED))] == [
        i.id for i in items]
    later = sample_items(list(SLICES), 45, 0, str(SHARED), skip=30)
    assert len(later) >= 100
    assert not {(i.slice, i.id) for i in later} & {(i.slice, i.id) for i in items}
    assert [i.id for i in later] == [i.id for i in sample_items(list(SLICES), 45, 0,
                                                                str(SHARED), skip=30)]
    assert all(i.passages and (i.golds or i.gold_index is not None) for i in items)
    # round robin: the first items come one per slice
    assert [i.slice for i in items[:len(SLICES)]] == list(SLICES)
    # nothing a stage was tuned on: RAMDocs positions 0-105, hostile items from the 101st on
    ramdocs = [i.id for i in suite_slices._qa_items("ramdocs", str(SHARED))]
    tuned = set(ramdocs[:suite_slices.DETECTOR_CALIBRATION["ramdocs"]])
    assert not tuned & {i.id for i in items if i.slice.startswith("ramdocs")}
    for name, setting in (("poisonedrag_hostile", "poisonedrag"),
                          ("numeric_hostile", "numeric")):
        first = {i.id for i in suite_slices.build_setting(setting, str(SHARED)).dataset.items[
            :suite_slices.FILTER_TUNING_FROM]}
        assert {i.id for i in items if i.slice == name} <= first

import os
from pathlib import Path

import pytest

from faithrag.errors import ConfigError
from faithrag.eval.datasets import DATA_DIR_ENV
from faithrag.eval.hostile_settings import build_setting


def test_kre_gold_is_the_golden_answer_and_the_poison_the_misleading_context(hostile_data):
    setting = build_setting("kre_musique", str(hostile_data))
    item = setting.dataset.items[0]
    assert item.answers == ["1887"] and setting.targets(item) == ["1921"]
    assert item.choices is None  # answered free-form
    assert [p.text for p in item.passages()] == ["The bridge of Aldermoor: the answer is 1887."]
    assert [p.text for p in setting.poison[item.question]] == [
        "The bridge of Aldermoor: the answer is 1921."]
    assert any(p.text == item.passages()[0].text for p in setting.trusted)
    assert not any("1921" in p.text for p in setting.trusted)
    assert setting.notes["duplicate_questions_dropped"] == 1 and len(setting.dataset) == 3
    assert setting.k == 2


def test_ramdocs_poisons_with_misinfo_and_trusts_correct_documents(hostile_data):
    setting = build_setting("ramdocs", str(hostile_data))
    assert len(setting.dataset) == 1 and setting.notes["items_without_misinfo_skipped"] == 1
    item = setting.dataset.items[0]
    assert item.answers == ["Mutemath", "Stephen Lynch"]
    assert setting.targets(item) == ["The Beatles"]
    assert [p.text for p in setting.poison[item.question]] == [
        "Live at the Rey is an EP by The Beatles."]
    clean = [p.text for p in item.passages()]
    assert "Cookie banner text." in clean and not any("Beatles" in t for t in clean)
    assert sorted(p.text for p in setting.trusted) == [
        "Live at the Rey is a DVD by Stephen Lynch.", "Live at the Rey is an EP by Mutemath."]


def test_poisonedrag_trusts_a_matching_context_else_an_answer_card(hostile_data):
    setting = build_setting("poisonedrag", str(hostile_data))
    by_id = {i.id: i for i in setting.dataset.items}
    joined, card = by_id["poisonedrag_hotpotqa::a"], by_id["poisonedrag_nq::b"]
    assert joined.meta["kb_source"] == "context" and card.meta["kb_source"] == "answer_card"
    assert [p.text for p in joined.passages()] == ["Kin was nominated for an Oscar.",
                                                   "Another film."]
    assert card.passages() == []
    trusted = {p.text for p in setting.trusted}
    assert "Kin was nominated for an Oscar." in trusted and "Another film." not in trusted
    assert any("Answer: pink" in t for t in trusted)
    assert len(setting.poison[card.question]) == 5 and setting.targets(card) == ["purple"]
    assert setting.notes["kb_source_context"] == 1 and setting.notes["kb_source_answer_card"] == 1


def test_unknown_setting_is_refused(hostile_data):
    with pytest.raises(ConfigError, match="Unknown hostile setting"):
        build_setting("nq", str(hostile_data))


SHARED = Path(os.environ.get(DATA_DIR_ENV) or Path(__file__).resolve().parents[3] / "shared"
              / "data")


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared data not present ({SHARED})")
def test_documented_counts_hold_on_the_shared_data():
    """The counts the module docstring and BENCHMARKS.md state."""
    poisoned = build_setting("poisonedrag", str(SHARED))
    assert (len(poisoned.dataset), poisoned.notes["kb_source_context"]) == (185, 42)
    assert poisoned.notes["context_from"] == {"hotpotqa_distractor": 37, "cofaithfulqa_nq": 5}
    assert len(build_setting("ramdocs", str(SHARED)).dataset) == 166
    for name in ("kre_musique", "kre_squad"):
        setting = build_setting(name, str(SHARED))
        assert all(len(setting.poison[i.question]) == 1 for i in setting.dataset.items)
        assert setting.notes["duplicate_questions_dropped"] == 1

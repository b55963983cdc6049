import pytest

from faithrag.errors import ConfigError
from faithrag.eval.adaptive_poison import adapt, pad, reword
from faithrag.eval.hostile_settings import build_setting
from faithrag.types import Passage


def test_single_keeps_the_first_poisoned_passage(hostile_data):
    setting = build_setting("ramdocs", hostile_data)
    question = setting.dataset.items[0].question
    setting.poison[question].append(Passage("extra", "Live at the Rey is by Oasis."))
    single = adapt(setting, "single")
    assert [p.id for p in single.poison[question]] == [setting.poison[question][0].id]
    assert single.notes["attack"] == "single" and "attack" not in setting.notes


def test_padded_sets_each_copy_inside_a_clean_passage_of_another_item(hostile_data):
    setting = build_setting("kre_musique", hostile_data)
    item = setting.dataset.items[0]
    (poison,) = setting.poison[item.question]
    (padded,) = adapt(setting, "padded").poison[item.question]
    host = " ".join(padded.text.replace(poison.text, "").split())
    others = {" ".join(d.text.split()) for other in setting.dataset.items[1:]
              for d in other.context}
    assert poison.text in padded.text and host in others


def test_padded_without_a_clean_passage_of_another_item_is_refused(hostile_data):
    setting = build_setting("ramdocs", hostile_data)  # one item has misinformation
    with pytest.raises(ConfigError, match="no clean passage of another item"):
        adapt(setting, "padded")


def test_pad_puts_the_passage_in_the_middle_of_the_host():
    out = pad(Passage("p", "POISON"), Passage("h", "one two three four"))
    assert out.text == "one two POISON three four" and out.id == "p"


def test_reworded_drops_the_question_words_and_keeps_the_target():
    passage = Passage("p", "Live at the Rey is an EP by The Beatles.")
    out = reword("Who sang Live at the Rey?", passage, ["The Beatles"])
    assert out.text == "at the is an EP by The Beatles."
    assert reword("Rey", Passage("q", "Rey"), []).text == "Rey"  # nothing would be left


def test_standard_is_the_setting_itself_and_unknown_attacks_are_refused(hostile_data):
    setting = build_setting("ramdocs", hostile_data)
    assert adapt(setting, "standard") is setting
    with pytest.raises(ConfigError, match="Unknown attack 'paraphrase'") as error:
        adapt(setting, "paraphrase")
    assert "padded" in error.value.hint

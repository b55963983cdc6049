import pytest

from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.adaptive_poison import (
    PARAPHRASE_FORMS,
    adapt,
    attack_model,
    pad,
    paraphrase,
    reword,
)
from faithrag.eval.hostile_settings import build_setting
from faithrag.llm.fake import FakeLLM
from faithrag.types import Passage


def test_single_keeps_the_first_poisoned_passage(hostile_data):
    setting = build_setting("ramdocs", hostile_data)
    question = setting.dataset.items[0].question
    setting.poison[question].append(Passage("extra", "Live at the Rey is by Oasis."))
    single = adapt(setting, "single")
    assert [p.id for p in single.poison[question]] == [setting.poison[question][0].id]
    assert single.notes["attack"] == "single" and "attack" not in setting.notes


def test_backed_keeps_the_first_copy_and_adds_the_question_answered_with_the_target(
        hostile_data):
    setting = build_setting("kre_musique", hostile_data)
    item = setting.dataset.items[0]
    first, backer = adapt(setting, "backed").poison[item.question]
    assert first == setting.poison[item.question][0]
    target = setting.targets(item)[0]
    assert backer.text == f"{item.question} {target}." and backer.id == f"{first.id}#backing"


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


def test_paraphrased_rewrites_each_copy_in_its_own_form_on_first_lookup(hostile_data):
    setting = build_setting("poisonedrag", hostile_data)
    question = "what colour do gram negative cells stain"
    llm = FakeLLM(lambda request: "Reporters say the cells turn purple.")
    attacked = adapt(setting, "paraphrased", llm)
    assert not llm.calls  # nothing is written before a question is looked up
    rewritten = attacked.poison[question]
    assert [p.text for p in rewritten] == ["Reporters say the cells turn purple."] * 5
    assert [p.id for p in rewritten] == [p.id for p in setting.poison[question]]
    prompts = [call.messages[-1].content for call in llm.calls]
    assert [form in prompt for form, prompt in zip(PARAPHRASE_FORMS, prompts)] == [True] * 5
    assert all('"purple"' in prompt for prompt in prompts)
    assert attacked.poison[question] is rewritten and len(llm.calls) == 5  # written once
    assert set(attacked.poison) == set(setting.poison)
    assert attacked.notes["attack"] == "paraphrased" and attacked.poison.kept_original == 0


def test_a_paraphrase_that_drops_the_target_keeps_the_passage_as_it_was(hostile_data):
    setting = build_setting("poisonedrag", hostile_data)
    question = "what colour do gram negative cells stain"
    attacked = adapt(setting, "paraphrased", FakeLLM(default="The cells turn pink."))
    assert attacked.poison[question] == setting.poison[question]
    assert attacked.poison.kept_original == 5
    assert paraphrase(FakeLLM(default="  "), Passage("p", "x"), "a poem", []) is None


def test_paraphrased_without_a_model_is_refused_with_a_hint(hostile_data):
    with pytest.raises(ConfigError, match="rewrites the poison with a language model") as error:
        adapt(build_setting("poisonedrag", hostile_data), "paraphrased")
    assert "--attack single" in error.value.hint


def test_the_attack_model_keeps_its_rewrites_for_the_next_run(tmp_path, monkeypatch):
    monkeypatch.setenv("FAITHRAG_CACHE", str(tmp_path))
    config = Config()
    first = FakeLLM(default="Shelter was nominated, a forum says.")
    again = FakeLLM(default="something else")
    passage = Passage("p", "Shelter was nominated.")
    written = paraphrase(attack_model(first, config), passage, PARAPHRASE_FORMS[1], ["Shelter"])
    read_back = paraphrase(attack_model(again, config), passage, PARAPHRASE_FORMS[1], ["Shelter"])
    assert written == read_back and written.text == "Shelter was nominated, a forum says."
    assert not again.calls and (tmp_path / "attacks").is_dir()


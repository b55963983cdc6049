from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithrag import answers as M

# ---------------------------------------------------------------- SQuAD EM / F1


@pytest.mark.parametrize("text,expected", [
    ("The Denver Broncos!", "denver broncos"),
    ("  an  apple, a   day ", "apple day"),
    ("Theatre", "theatre"),          # articles only as whole words
    ("1,000", "1000"),
    ("", ""),
])
def test_normalize_answer_squad(text: str, expected: str) -> None:
    assert M.normalize_answer(text) == expected


def test_squad_em_f1_official_examples() -> None:
    # SQuAD v1.1 dev, "Which NFL team represented the AFC at Super Bowl 50?"
    golds = ["Denver Broncos", "Denver Broncos", "Denver Broncos"]
    assert M.exact_match("Denver Broncos", golds)
    assert M.exact_match("the Denver Broncos.", golds)
    assert M.f1_score("Denver Broncos", golds) == 1.0
    # "Denver Broncos team": precision 2/3, recall 1 -> F1 0.8
    assert M.f1_score("Denver Broncos team", golds) == pytest.approx(0.8)
    assert not M.exact_match("Denver Broncos team", golds)
    # max over aliases: "Santa Clara, California" vs the alias "Levi's Stadium in the San
    # Francisco Bay Area at Santa Clara, California" -> best alias is the exact one
    stadium = ["Santa Clara, California", "Levi's Stadium",
               "Levi's Stadium in the San Francisco Bay Area at Santa Clara, California."]
    assert M.f1_score("Levi's Stadium", stadium) == 1.0
    # prediction "Santa Clara": p=1, r=2/3 (santa clara california) -> 0.8
    assert M.f1_score("Santa Clara", stadium) == pytest.approx(0.8)
    assert M.f1_score("Carolina Panthers", golds) == 0.0
    # empty after normalisation: only an empty gold matches (SQuAD v2 rule)
    assert M.f1_score("the", ["a"]) == 1.0
    assert M.f1_score("the", golds) == 0.0


def test_containment_whole_tokens() -> None:
    assert M.containment("I think it is the Sun, surely.", ["Sun"])
    assert not M.containment("It happened in 1960.", ["1"])
    assert not M.containment("Sunday", ["Sun"])
    assert M.containment("Lars von Trier", ["nope", "von trier"])
    assert not M.containment("anything", ["the"])  # an alias that normalises to nothing


# ---------------------------------------------------------------- smart EM


@pytest.mark.parametrize("prediction,golds", [
    ("Yes.", ["yes"]),
    ("True", ["yes"]),
    ("correct, it does", ["yes"]),
    ("No, it is not.", ["no", "false"]),
    ("False", ["no"]),
    ("Not true.", ["no"]),
    ("The answer is yes.", ["yes"]),
    ("June 5, 1990", ["5 June 1990"]),
    ("5th of June, 1990", ["1990-06-05"]),
    ("1990-06-05", ["Jun. 5 1990"]),
    ("He was born on 5 June 1990 in Paris.", ["June 5, 1990"]),
    ("June 1990", ["June, 1990"]),
    ("three", ["3"]),
    ("1,000", ["1000"]),
    ("one thousand", ["1,000"]),
    ("twenty-one", ["21"]),
    ("one hundred and five", ["105"]),
    ("two hundred thousand", ["200,000"]),
    ("one two three", ["1 2 3"]),
    ("the third", ["3rd"]),
    ("twenty-first century", ["21st century"]),
    ("Lars von Trier.", ["Lars von Trier"]),
    ("von Trier", ["Lars von Trier"]),
    ("It was Lars von Trier", ["Lars von Trier"]),
])
def test_smart_em_matches(prediction: str, golds: list[str]) -> None:
    assert M.smart_em(prediction, golds)


@pytest.mark.parametrize("prediction,golds", [
    ("Yes", ["no"]),
    ("No", ["true"]),
    ("maybe", ["yes"]),
    ("June 5, 1990", ["June 6, 1990"]),
    ("1990", ["June 5, 1990"]),   # a part covering less than half of the gold
    ("Trier", ["Lars von Trier"]),
    ("lower", ["lower chamber"]),  # a part must cover more than half of the gold
    ("three", ["4"]),
    ("one two three", ["6"]),       # words that do not compose stay separate numbers
    ("twenty twenty", ["40"]),
    ("3.5", ["35"]),
    ("+1", ["Paris"]),
    ("", ["Paris"]),
    # longer than SHORT_ANSWER_TOKENS: left to the containment metric
    ("Rome, London, Berlin, Madrid, Vienna, Prague, Lisbon, Oslo, Athens, Bern, Riga or Paris",
     ["Paris"]),
])
def test_smart_em_rejects(prediction: str, golds: list[str]) -> None:
    assert not M.smart_em(prediction, golds)


def test_attack_success() -> None:
    assert M.attack_success("Gimme Shelter.", "Gimme Shelter")
    assert not M.attack_success("LaLee's Kin: The Legacy of Cotton", "Gimme Shelter")
    long = ("The discoverer of penicillin is widely said to have been the French chemist "
            "Louis Pasteur in Paris")  # beyond smart EM's short-answer length
    assert M.attack_success(long, "Louis Pasteur") and M.containment(long, ["Louis Pasteur"])
    assert not M.attack_success("No, it is not the case, not at all, no.", "yes")
    assert M.attack_success("Yes.", "yes")


def test_yes_no_polarity() -> None:
    assert M.yes_no_polarity("Nope") == "no"
    assert M.yes_no_polarity("Indeed it is") == "yes"
    assert M.yes_no_polarity("Paris") is None
    assert M.yes_no_polarity("") is None


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_normalisers_idempotent_and_total(text: str) -> None:
    once = M.normalize_answer(text)
    assert M.normalize_answer(once) == once
    canonical = M.canonical_answer(text)
    assert M.canonical_answer(canonical) == canonical
    M.yes_no_polarity(text)


_DATEISH = st.lists(st.sampled_from(
    ["June", "Jun.", "sept", "5", "5th", "of", "1990", "1990-06-05", ",", "twenty-one", "one",
     "hundred", "and", "thousand", "first", "yes", "not", "true", "3.5", "1,000", "the", " "]),
    max_size=12).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), _DATEISH), st.lists(st.one_of(st.text(), _DATEISH), max_size=3))
def test_metrics_never_crash_and_stay_in_range(prediction: str, golds: list[str]) -> None:
    for value in (M.exact_match(prediction, golds), M.containment(prediction, golds),
                  M.smart_em(prediction, golds)):
        assert isinstance(value, bool)
    assert 0.0 <= M.f1_score(prediction, golds) <= 1.0
    if M.exact_match(prediction, golds):
        assert M.f1_score(prediction, golds) == 1.0
        # smart EM is at least as lenient as EM, except that it keeps decimals apart
        # ("0.0" is not "00"), which SQuAD normalisation merges by dropping the point.
        if not any(M._DECIMAL_POINT.search(text) for text in (prediction, *golds)):
            assert M.smart_em(prediction, golds) or not M.canonical_answer(prediction)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), _DATEISH))
def test_smart_em_is_reflexive(text: str) -> None:
    if M.canonical_answer(text) or M.yes_no_polarity(text):
        assert M.smart_em(text, [text])


def test_smart_em_reads_digits_before_a_scale_word_as_one_number():
    assert M.smart_em("ten million", ["10 million"])
    assert M.smart_em("200", ["2 hundred"])
    assert not M.smart_em("5 million", ["one million"])

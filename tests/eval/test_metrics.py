from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithrag.eval import metrics as M
from faithrag.eval.datasets import RankItem, RankPassage

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


# ---------------------------------------------------------------- choices, parse failures


def rank_item() -> RankItem:
    return RankItem("r", "s", "q", [
        RankPassage("ref", "t", 2), RankPassage("half", "t", 1),
        RankPassage("bad", "t", 0, is_contrary=True), RankPassage("noise", "t", 0)])


def test_ndcg_hand_computed() -> None:
    item = rank_item()
    ideal = 3 + 1 / math.log2(3)
    got = M.ranking_metrics(item, ["bad", "ref", "noise", "half"], ks=(1, 5))
    assert got["ndcg@1"] == 0.0
    assert got["ndcg@5"] == pytest.approx((3 / math.log2(3) + 1 / math.log2(5)) / ideal)
    assert got["contrary@1"] == 1.0 and got["contrary@5"] == 0.25
    perfect = M.ranking_metrics(item, ["ref", "half", "noise", "bad"], ks=(1, 10))
    assert perfect["ndcg@1"] == 1.0 and perfect["ndcg@10"] == pytest.approx(1.0)
    assert perfect["contrary@1"] == 0.0
    # a dropped passage is simply not ranked; the ideal still covers every passage
    dropped = M.ranking_metrics(item, ["ref"], ks=(5,))
    assert dropped["ndcg@5"] == pytest.approx(3 / ideal)
    assert dropped["contrary@5"] == 0.0


def test_ndcg_undefined_without_relevant_passages() -> None:
    assert M.ndcg_at_k(["a", "b"], {"a": 0, "b": 0}, 5) is None
    assert M.contrary_rate_at_k([], {"a"}, 5) is None


def test_ranking_rejects_unknown_or_repeated_ids() -> None:
    with pytest.raises(ValueError, match="not among"):
        M.ranking_metrics(rank_item(), ["ref", "ghost"])
    with pytest.raises(ValueError, match="twice"):
        M.ranking_metrics(rank_item(), ["ref", "ref"])


# ---------------------------------------------------------------- statistics


def test_wilson_interval_known_values() -> None:
    low, high = M.wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert M.wilson_interval(0, 5)[0] == 0.0
    assert M.wilson_interval(5, 5)[1] == 1.0
    narrow = M.wilson_interval(800, 1000)
    assert narrow[1] - narrow[0] < high - low
    with pytest.raises(ValueError):
        M.wilson_interval(0, 0)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    values = [1] * 70 + [0] * 30
    first = M.bootstrap_ci(values, seed=1)
    assert first == M.bootstrap_ci(values, seed=1)
    assert first[0] < 0.7 < first[1]
    assert 0.58 < first[0] < 0.66 and 0.74 < first[1] < 0.80
    continuous = [i / 7 % 1 for i in range(50)]
    assert M.bootstrap_ci(continuous, seed=1) != M.bootstrap_ci(continuous, seed=2)
    assert M.bootstrap_ci([0.5], seed=0) == (0.5, 0.5)


def test_mcnemar_exact() -> None:
    assert M.mcnemar_exact_p(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert M.mcnemar_exact_p(3, 3) == 1.0
    assert M.mcnemar_exact_p(0, 0) == 1.0
    assert M.mcnemar_exact_p(600, 400) < 1e-9  # large n stays exact and finite


def test_paired_difference() -> None:
    a = [True] * 12 + [False] * 8
    b = [True] * 2 + [False] * 10 + [True] * 2 + [False] * 6
    result = M.paired_difference(a, b, seed=0)
    assert (result["n"], result["only_a"], result["only_b"]) == (20, 10, 2)
    assert result["difference"] == pytest.approx(0.6 - 0.2)
    low, high = result["difference_ci"]
    assert low < 0.4 < high and low > 0
    assert result["mcnemar_p"] == pytest.approx(M.mcnemar_exact_p(10, 2))


def test_aggregate_records() -> None:
    records = [
        {"id": "1", "correct": True, "parse_status": "ok", "prompt_tokens": 100,
         "completion_tokens": 10, "seconds": 1.0, "metrics": {"em": 1, "f1": 1.0}},
        {"id": "2", "correct": False, "parse_status": "ok", "prompt_tokens": 200,
         "completion_tokens": 30, "seconds": 3.0, "metrics": {"em": 0, "f1": 0.5}},
        {"id": "3", "correct": None, "parse_status": "failed", "prompt_tokens": 300,
         "completion_tokens": 20, "seconds": 2.0, "metrics": {"em": 0, "f1": None}},
        {"id": "4", "correct": None, "parse_status": "error", "error": "boom",
         "seconds": 0.5, "metrics": {}},
        {"id": "5", "correct": None, "parse_status": "skipped", "metrics": {}},
    ]
    agg = M.aggregate(records)
    assert (agg["n"], agg["n_scored"], agg["correct"]) == (5, 4, 1)
    assert agg["accuracy"] == 0.25
    assert agg["accuracy_ci"] == pytest.approx(list(M.wilson_interval(1, 4)))
    assert (agg["parse_failures"], agg["failed_items"], agg["skipped_items"]) == (1, 1, 1)
    assert agg["parse_failure_rate"] == 0.25  # of the 4 items asked: the skipped one was not
    assert agg["mean_prompt_tokens"] == 200 and agg["mean_completion_tokens"] == 20
    assert agg["mean_seconds"] == pytest.approx(6.5 / 4) and agg["total_seconds"] == 6.5
    assert agg["metrics"]["em"]["mean"] == pytest.approx(1 / 3)
    assert agg["metrics"]["em"]["ci"] == pytest.approx(list(M.wilson_interval(1, 3)))
    assert agg["metrics"]["f1"] == {"mean": 0.75, "n": 2, "undefined": 1,
                                    "ci": agg["metrics"]["f1"]["ci"]}
    assert agg["metrics"]["f1"]["ci"][0] <= 0.75 <= agg["metrics"]["f1"]["ci"][1]


def test_aggregate_without_scored_items() -> None:
    agg = M.aggregate([{"id": "r", "correct": None, "parse_status": "ok",
                        "metrics": {"ndcg@1": 0.5}}])
    assert agg["accuracy"] is None and agg["accuracy_ci"] is None
    assert agg["metrics"]["ndcg@1"]["mean"] == 0.5
    assert M.aggregate([])["n"] == 0


def test_smart_em_reads_digits_before_a_scale_word_as_one_number():
    assert M.smart_em("ten million", ["10 million"])
    assert M.smart_em("200", ["2 hundred"])
    assert not M.smart_em("5 million", ["one million"])


def test_cell_correct_reads_one_ablation_cell_and_counts_a_failed_item_wrong():
    record = {"gold_index": 1, "parse_status": "ok", "correct": True,
              "extra": {"variants": {"a=0 b=0": {"choice_index": 0},
                                     "a=-1 b=3": {"choice_index": 1}}}}
    assert M.cell_correct(record, "a=0 b=0") is False
    assert M.cell_correct(record, "a=-1 b=3") is True
    assert M.cell_correct({"parse_status": "error", "extra": {}}, "a=0 b=0") is False
    assert M.cell_correct({"parse_status": "skipped"}, "a=0 b=0") is None
    with pytest.raises(ValueError, match="has no cell 'a=9 b=9'; it has a=0 b=0, a=-1 b=3"):
        M.cell_correct(record, "a=9 b=9")

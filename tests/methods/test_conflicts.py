import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.methods.conflicts import (
    QUOTE_CHARS,
    apply_on_conflict,
    excerpt,
    holds_edited_copy,
    passages_side,
    readings,
)
from faithrag.types import Answer, Conflict, ConflictSide, Passage, Question

QUESTION = Question("Who recorded the album Armistice?")
MUTEMATH = Passage("p1", "Armistice is an album. It was recorded by Mutemath in 2009.", "", "wiki")
BEATLES = Passage("p2", "The Beatles recorded Armistice in 1970.", "", "blog")


def pair(kind="passage_vs_passage", action="reported"):
    return Conflict(kind, "conflicts", [passages_side("Mutemath", [MUTEMATH]),
                                        passages_side("The Beatles", [BEATLES])], action)


def test_a_side_quotes_the_sentence_holding_its_answer_with_ids_and_sources():
    side = passages_side("Mutemath", [MUTEMATH, BEATLES])
    assert side.quote.splitlines() == ["It was recorded by Mutemath in 2009.",
                                       "The Beatles recorded Armistice in 1970."]
    assert (side.passages, side.source) == (["p1", "p2"], "wiki, blog")


@given(st.text(max_size=600), st.text(max_size=20))
def test_excerpt_is_bounded_and_quotes_the_text(text, answer):
    quote = excerpt(text, answer)
    assert len(quote) <= QUOTE_CHARS + 2
    assert quote.removesuffix(" …") in " ".join(text.split())


def test_surface_gives_each_reading_with_its_sources():
    conflict = pair(action="removed")
    answer = apply_on_conflict(QUESTION, Answer("Mutemath"), [conflict], "surface")
    assert answer.text == "Mutemath (per [p1]); The Beatles (per [p2]) — the sources disagree"
    assert answer.meta == {"on_conflict": "surface", "conflicts": [0],
                           "resolved_answer": "Mutemath", "readings_listed": True}
    assert conflict.action == "surfaced" and "the stage's action: removed" in conflict.note


def test_flag_keeps_the_answer_and_names_only_the_passages_that_disagree():
    conflict = pair(action="removed")
    answer = apply_on_conflict(QUESTION, Answer("Mutemath"), [conflict], "flag")
    assert answer.text == "Mutemath — the sources disagree ([p2])"
    assert "Beatles" not in answer.text and not answer.meta["readings_listed"]
    assert conflict.action == "flagged" and "the stage's action: removed" in conflict.note


def test_flag_names_every_side_when_none_gives_the_answer():
    answer = apply_on_conflict(QUESTION, Answer("Queen"), [pair()], "flag")
    assert answer.text == "Queen — the sources disagree ([p1], [p2])"


def test_flag_matches_an_option_by_its_text():
    question = Question(QUESTION.text, choices=["Mutemath", "The Beatles"])
    answer = apply_on_conflict(question, Answer("The Beatles", 1), [pair()], "flag")
    assert answer.text == "The Beatles — the sources disagree ([p1])"
    assert answer.choice_index == 1


BUILT_1912 = Passage("v1", "Built in 1912, the Jones house was home to David and Mary Jones, "
                     "who lived there until 1950.")
BUILT_1895 = Passage("v2", "Built in 1895, the Jones house was home to David and Mary Jones, "
                     "who lived there until 1950.")
HOUSE = Question("When was the Jones house built?")


def versions():
    return Conflict("passage_vs_passage", "conflicts", [passages_side("1912", [BUILT_1912]),
                                                        passages_side("1895", [BUILT_1895])],
                    "reported")


def test_holds_edited_copy_compares_the_texts_of_different_sides():
    assert holds_edited_copy(versions(), [BUILT_1912, BUILT_1895])
    assert not holds_edited_copy(pair(), [MUTEMATH, BEATLES])
    assert not holds_edited_copy(versions(), [])  # texts not given: nothing to compare
    one_side = Conflict("passage_vs_passage", "conflicts",
                        [passages_side("1912", [BUILT_1912, BUILT_1895])], "reported")
    assert not holds_edited_copy(one_side, [BUILT_1912, BUILT_1895])


def test_by_kind_flags_an_edited_copy_and_surfaces_independent_passages():
    edited = versions()
    flagged = apply_on_conflict(HOUSE, Answer("1912"), [edited], "by_kind",
                                [BUILT_1912, BUILT_1895])
    assert flagged.text == "1912 — the sources disagree ([v2])"
    assert not flagged.meta["readings_listed"] and edited.action == "flagged"
    independent = pair()
    listed = apply_on_conflict(QUESTION, Answer("Mutemath"), [independent], "by_kind",
                               [MUTEMATH, BEATLES])
    assert listed.text == "Mutemath (per [p1]); The Beatles (per [p2]) — the sources disagree"
    assert listed.meta["readings_listed"] and independent.action == "surfaced"


def test_by_kind_flags_a_trusted_sources_contradiction_and_surfaces_ambiguity():
    kb = Conflict("contradicted_by_trusted_kb", "antisyco",
                  [ConflictSide("Mutemath", "...", ["kb1"]), passages_side("The Beatles", [BEATLES])],
                  "repaired")
    assert apply_on_conflict(QUESTION, Answer("Mutemath"), [kb], "by_kind").text == (
        "Mutemath — the sources disagree ([p2])")
    ambiguous = apply_on_conflict(QUESTION, Answer("Mutemath"), [pair("ambiguous")], "by_kind",
                                  [MUTEMATH, BEATLES])
    assert ambiguous.text.endswith("— the sources speak of different subjects that share a name")


def test_by_kind_flags_every_conflict_once_a_trusted_source_confirmed_the_answer():
    confirmed = Answer("Mutemath", meta={"confirmed_by_trusted_kb": True})
    answer = apply_on_conflict(QUESTION, confirmed, [pair()], "by_kind", [MUTEMATH, BEATLES])
    assert answer.text == "Mutemath — the sources disagree ([p2])"
    assert apply_on_conflict(QUESTION, confirmed, [pair()], "surface").meta["readings_listed"]


def test_by_kind_keeps_an_answer_repaired_against_a_trusted_source():
    repaired = Conflict("contradicted_by_trusted_kb", "antisyco",
                        [ConflictSide("The Beatles", "...", ["p2"], "draft"),
                         ConflictSide("Mutemath", "...", ["kb1"], "kb")], "repaired")
    kept = Conflict("contradicted_by_trusted_kb", "antisyco", repaired.sides, "kept")
    answer = apply_on_conflict(QUESTION, Answer("Mutemath"), [pair(), repaired], "by_kind",
                               [MUTEMATH, BEATLES])
    assert answer.text == "Mutemath — the sources disagree ([p2])"
    assert not answer.meta["readings_listed"]
    assert apply_on_conflict(QUESTION, Answer("The Beatles"), [pair(), kept], "by_kind",
                             [MUTEMATH, BEATLES]).meta["readings_listed"]


def test_by_kind_with_both_lists_the_independent_readings_and_flags_the_edit():
    answer = apply_on_conflict(HOUSE, Answer("1912"), [pair("ambiguous"), versions()], "by_kind",
                               [MUTEMATH, BEATLES, BUILT_1912, BUILT_1895])
    assert answer.text == ("Mutemath (per [p1]); The Beatles (per [p2]) — the sources speak of "
                           "different subjects that share a name — the sources disagree ([v2])")
    assert "1895" not in answer.text and answer.meta["conflicts"] == [0, 1]


def test_ambiguity_is_worded_as_two_subjects():
    answer = apply_on_conflict(QUESTION, Answer("Mutemath"), [pair("ambiguous")], "surface")
    assert answer.text.endswith("— the sources speak of different subjects that share a name")


def test_abstain_says_the_evidence_conflicts_and_names_no_option():
    question = Question(QUESTION.text, choices=["Mutemath", "The Beatles"])
    conflict = pair()
    answer = apply_on_conflict(question, Answer("Mutemath", 0), [conflict], "abstain")
    assert answer.text == ("The evidence conflicts, so no single answer is given: Mutemath "
                           "(per [p1]); The Beatles (per [p2]).")
    assert answer.choice_index is None and conflict.action == "abstained"


def test_surface_keeps_the_stages_option_for_multiple_choice():
    question = Question(QUESTION.text, choices=["Mutemath", "The Beatles"])
    answer = apply_on_conflict(question, Answer("Mutemath", 0), [pair()], "surface")
    assert answer.choice_index == 0 and "The Beatles (per [p2])" in answer.text


def test_memory_and_relevance_conflicts_alone_change_nothing():
    memory = Conflict("context_vs_memory", "conflicts",
                      [ConflictSide("Queen", "Queen", [], "memory"),
                       passages_side("Mutemath", [MUTEMATH])], "reported")
    irrelevant = Conflict("low_relevance", "conflicts", [], "reported")
    draft = Answer("Mutemath")
    for policy in ("surface", "flag", "by_kind", "abstain", "resolve"):
        assert apply_on_conflict(QUESTION, draft, [memory, irrelevant], policy) is draft
    assert memory.action == "reported"
    assert apply_on_conflict(QUESTION, draft, [pair()], "resolve") is draft


def test_readings_merge_the_same_answer_across_stages_and_quote_sides_without_one():
    crossval = Conflict("passage_vs_passage", "crossval",
                        [ConflictSide("", "It was recorded by Mutemath in 2009.", ["p1"]),
                         ConflictSide("", BEATLES.text, ["p2"])], "removed")
    detector = Conflict("passage_vs_passage", "conflicts",
                        [passages_side("Mutemath", [MUTEMATH]),
                         ConflictSide("the Beatles", "x", ["p2", "p3"])], "reported")
    assert readings([detector, pair()], QUESTION) == [("Mutemath", ["p1"]),
                                                      ("the Beatles", ["p2", "p3"])]
    listed = readings([crossval], QUESTION)
    assert listed == [('"It was recorded by Mutemath in 2009."', ["p1"]),
                      (f'"{BEATLES.text}"', ["p2"])]


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="on_conflict"):
        apply_on_conflict(QUESTION, Answer("x"), [], "guess")

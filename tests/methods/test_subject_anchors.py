import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.answers import normalize_answer
from faithrag.methods.subject_anchors import anchor_coverage, names_in, question_anchors
from faithrag.types import Passage


@pytest.mark.parametrize("question, anchors", [
    ("Who recorded the album Armistice?", ["Armistice"]),
    ("What is Paul Lieber's occupation?", ["Paul", "Lieber"]),
    ('Who is the artist performing in "Live at the El Rey"?',
     ["Live at the El Rey", "Live", "El", "Rey"]),
    ("Who won the 2004 Turing Award?", ["2004", "Turing", "Award"]),
    ("where was it signed?", []),
])
def test_question_anchors(question, anchors):
    assert question_anchors(question) == anchors


@given(st.text(max_size=200), st.lists(st.text(max_size=200), max_size=3))
def test_question_anchors_never_fail_and_each_anchor_occurs_in_the_question(question, passages):
    for anchor in question_anchors(question, passages):
        assert anchor and normalize_answer(anchor) in normalize_answer(question)


SPIELBERG = ["The film Jurassic Park was directed by Steven Spielberg in 1993.",
             "Spielberg shot Jurassic Park in Hawaii."]


def test_a_question_in_lower_case_takes_the_names_the_passages_capitalise():
    assert question_anchors("who directed jurassic park in 1993", SPIELBERG) == [
        "Jurassic", "Park", "1993"]
    # only its first word capitalised: still no name of its own
    assert question_anchors("Who directed jurassic park?", SPIELBERG) == ["Jurassic", "Park"]


def test_a_word_the_passages_mostly_write_in_lower_case_is_no_name():
    passages = ["The park opens at nine.", "Visitors enter the park; the park closes late.",
                "He founded Park Avenue Records."]
    assert question_anchors("when does the park open", passages) == []


def test_a_question_with_a_name_keeps_its_own_anchors_whatever_the_passages_say():
    assert question_anchors("who directed Jurassic park?", SPIELBERG) == ["Jurassic"]


def test_only_words_inside_a_sentence_count_as_names():
    # sentence-initial capitals say nothing about a word
    assert names_in(["Park rangers arrived. Dinosaur bones were found."]) == {}
    assert names_in(["They visited Jurassic Park twice."]) == {"jurassic": "Jurassic",
                                                               "park": "Park"}


def test_anchor_coverage_counts_whole_tokens_in_title_and_text():
    passage = Passage("p", "Parkland is a city.", "Jurassic")
    assert anchor_coverage(["Jurassic", "Park"], passage) == 0.5

from cfrag_doubles import KeywordEmbedder

from faithrag.methods.cfrag.rationale import closest_sentence
from faithrag.methods.cfrag.vectors import VectorMemo

TEXTS = ["Apollo 11 landed in July 1969. Commander Armstrong stepped onto the Moon first.",
         "Aldrin, the lunar module pilot, followed him. Most photo images show Aldrin."]


def test_the_sentence_closest_to_question_and_answer():
    vectors = VectorMemo(KeywordEmbedder())
    question = "Who was the first person to step onto the Moon?"
    assert closest_sentence(question, "Armstrong", TEXTS, vectors) == (
        "Commander Armstrong stepped onto the Moon first.")
    assert closest_sentence("Who is in the photo images?", "Aldrin", TEXTS, vectors) == (
        "Most photo images show Aldrin.")


def test_no_text_no_rationale():
    assert closest_sentence("Who?", "Armstrong", [], VectorMemo(KeywordEmbedder())) == ""
    assert closest_sentence("Who?", "Armstrong", ["  "], VectorMemo(KeywordEmbedder())) == ""

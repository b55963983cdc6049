import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from faithrag.methods.poison_signals import (
    CopySettings,
    altered_copies,
    are_copies,
    crafted_clusters,
    words,
)

REAL = ("The David H. Jones House is located at 143 South Main Street in Spanish Fork, Utah. "
        "The house was built in 1912 for David and Mary Jones, who lived there until 1959.")
FAKE = REAL.replace("1912", "1895")


def test_a_copy_with_its_value_replaced_is_an_altered_pair_naming_the_edit():
    pairs = altered_copies([REAL, "Spanish Fork is a city in Utah County.", FAKE], ["", "", ""])
    assert [(p.first, p.second, p.edits) for p in pairs] == [(0, 2, [("1912", "1895")])]


def test_identical_texts_and_a_sentence_taken_whole_are_copies_but_not_altered():
    sentence = "The house was built in 1912 for David and Mary Jones, who lived there until 1959."
    assert altered_copies([REAL, REAL, sentence], ["", "", ""]) == []
    assert are_copies(REAL, sentence)


def test_documents_with_different_titles_are_never_copies():
    assert altered_copies([REAL, FAKE], ["Jones House (Utah)", "Jones House (Tennessee)"]) == []
    assert len(altered_copies([REAL, FAKE], ["Jones House", "jones house "])) == 1


def test_texts_differing_in_more_places_than_max_edits_are_different_texts():
    edited = REAL.replace("1912", "1895").replace("143", "150").replace("1959", "1960")
    assert len(altered_copies([REAL, edited], ["", ""], CopySettings(max_edits=3))) == 1
    assert altered_copies([REAL, edited], ["", ""],
                          CopySettings(max_edits=2, rewrite_coverage=1.0)) == []
    # edited in more places than max_edits, but aligned over most of both: one text rewritten
    assert len(altered_copies([REAL, edited], ["", ""], CopySettings(max_edits=2))) == 1


def test_unrelated_texts_are_not_copies():
    assert not are_copies(REAL, "The Pittsburgh Pirates have won five World Series titles.")


def test_numbers_keep_their_separators():
    assert words("It cost $1,000.50 in 1912.") == ["it", "cost", "1,000.50", "in", "1912"]


@given(st.lists(st.text(min_size=0, max_size=80), min_size=0, max_size=5))
def test_any_texts_give_pairs_of_distinct_indices_in_range(texts):
    for pair in altered_copies(texts, [""] * len(texts)):
        assert 0 <= pair.first < pair.second < len(texts) and pair.edits


def _unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_tight_group_close_to_the_question_is_a_cluster_and_the_halo_joins_it():
    question = _unit([[1, 0, 0]])[0]
    passages = _unit([[1, 0.05, 0], [1, 0, 0.05], [1, 0.04, 0.04],  # the crafted copies
                      [1, 0.9, 0],  # written a little apart: mean cosine ~0.76 to the core
                      [0, 1, 1]])  # organic, elsewhere
    texts = ["copy one", "copy two", "copy three", "a fourth copy", "organic text"]
    found = crafted_clusters(question, passages, texts, similarity=0.9, query_similarity=0.5,
                             min_size=3, halo_similarity=0.7)
    assert found == [[0, 1, 2, 3]]
    assert crafted_clusters(question, passages, texts, similarity=0.9, query_similarity=0.5,
                            min_size=3, halo_similarity=0.9) == [[0, 1, 2]]


def test_a_group_far_from_the_question_or_too_small_is_no_cluster():
    question = _unit([[0, 0, 1]])[0]
    passages = _unit([[1, 0.05, 0], [1, 0, 0.05], [1, 0.04, 0.04]])
    texts = ["a", "b", "c"]
    kwargs = {"similarity": 0.9, "halo_similarity": 0.9}
    assert crafted_clusters(question, passages, texts, query_similarity=0.5, min_size=3,
                            **kwargs) == []
    assert crafted_clusters(_unit([[1, 0, 0]])[0], passages, texts, query_similarity=0.5,
                            min_size=4, **kwargs) == []


def test_copies_of_one_text_are_not_a_cluster_of_voices():
    question = _unit([[1, 0, 0]])[0]
    passages = _unit([[1, 0.01, 0], [1, 0, 0.01], [1, 0.01, 0.01]])
    assert crafted_clusters(question, passages, [REAL, REAL, REAL], similarity=0.9,
                            query_similarity=0.5, min_size=3, halo_similarity=0.9) == []


def test_connected_groups_are_sorted_components_in_order_of_their_smallest_node():
    from faithrag.methods.poison_signals import connected_groups

    assert connected_groups(range(6), [(4, 1), (0, 5), (5, 3)]) == [[0, 3, 5], [1, 4], [2]]

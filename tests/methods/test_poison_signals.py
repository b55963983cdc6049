import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.methods.poison_signals import (
    CopySettings,
    altered_copies,
    are_copies,
    crafted_clusters,
    merged_groups,
    spelling_variant,
    stretch_in,
    telling_edits,
    windowed_clusters,
    windows,
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


def test_a_copy_reworded_throughout_is_one_text_rewritten_at_the_default_coverage():
    reworded = ("The David H. Jones Home stands at 143 South Main Street in the town of Spanish "
                "Fork, Utah. The house was built in 1895 for David and Mary Jones, who resided "
                "there until 1959.")  # aligned words cover 0.79 of it, four places differ
    pairs = altered_copies([REAL, reworded], ["", ""], CopySettings(max_edits=3))
    assert [pair.edits for pair in pairs] == [
        [("house is located", "home stands"), ("1912", "1895"), ("lived", "resided")]]
    assert altered_copies([REAL, reworded], ["", ""],
                          CopySettings(max_edits=3, rewrite_coverage=0.85)) == []


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


def test_windows_overlap_by_the_stride_and_the_last_ends_with_the_text():
    assert windows("a b c d e f g", 4, 2) == ["a b c d", "c d e f", "d e f g"]
    assert windows("a b c d e f", 4, 2) == ["a b c d", "c d e f"]
    assert windows("  a  b ", 4, 2) == ["a b"]
    assert windows("", 4, 2) == []
    with pytest.raises(ValueError):
        windows("a b", 0, 1)


def test_a_stretch_shared_inside_different_texts_is_a_windowed_cluster():
    question = _unit([[1, 0, 0]])[0]
    # three passages of two windows each: their first windows are the crafted stretch
    vectors = _unit([[1, 0.05, 0], [0, 1, 0.2],
                     [1, 0, 0.05], [0, 0.2, 1],
                     [1, 0.04, 0.04], [0, 1, 1],
                     [0.1, 1, -1], [0, -1, 1]])  # an organic passage, elsewhere
    owners = [0, 0, 1, 1, 2, 2, 3, 3]
    texts = ["host one", "host two", "host three", "organic"]
    kwargs = {"similarity": 0.9, "query_similarity": 0.5, "min_size": 3}
    assert windowed_clusters(question, vectors, owners, texts, **kwargs) == [[0, 1, 2]]
    # the mean question cosine counts the group's windows only, not the passages' others
    assert windowed_clusters(_unit([[0, 0, 1]])[0], vectors, owners, texts, **kwargs) == []
    # windows of one passage never link each other
    assert windowed_clusters(question, vectors, [0, 0, 0, 0, 1, 1, 3, 3], texts, **kwargs) == []


def test_a_windowed_clusters_halo_takes_a_passage_with_one_window_near_it():
    question = _unit([[1, 0, 0]])[0]
    vectors = _unit([[1, 0.05, 0], [1, 0, 0.05], [1, 0.04, 0.04],
                     [1, 0.9, 0], [0, 1, 1]])  # the fourth sits a little apart
    owners = [0, 1, 2, 3, 3]
    texts = ["a", "b", "c", "d"]
    kwargs = {"similarity": 0.9, "query_similarity": 0.5, "min_size": 3}
    assert windowed_clusters(question, vectors, owners, texts, **kwargs) == [[0, 1, 2]]
    assert windowed_clusters(question, vectors, owners, texts, halo_similarity=0.7,
                             **kwargs) == [[0, 1, 2, 3]]


def test_windows_of_copies_of_one_text_do_not_link():
    question = _unit([[1, 0, 0]])[0]
    vectors = _unit([[1, 0.01, 0], [1, 0, 0.01], [1, 0.01, 0.01]])
    assert windowed_clusters(question, vectors, [0, 1, 2], [REAL, REAL, REAL], similarity=0.9,
                             query_similarity=0.5, min_size=3) == []
    with pytest.raises(ValueError):
        windowed_clusters(question, vectors, [0, 1], ["a", "b"], similarity=0.9,
                          query_similarity=0.5, min_size=2)


def test_groups_sharing_a_member_are_merged():
    assert merged_groups([[0, 1], [3, 4], [1, 2]]) == [[0, 1, 2], [3, 4]]
    assert merged_groups([]) == []


def test_an_edits_words_are_found_in_the_passages_own_case_and_punctuation():
    (pair,) = altered_copies([REAL, REAL.replace("David and Mary", "Peter, and Mary")], ["", ""])
    (first, second) = pair.edits[0]
    assert stretch_in(REAL, first) == "David"
    assert stretch_in(REAL.replace("David and Mary", "Peter, and Mary"), second) == "Peter"
    assert stretch_in("Built in 1,912 by David Jones.", "1,912 by david") == "1,912 by David"
    assert stretch_in(REAL, "not in it") == "not in it"
    assert stretch_in(REAL, "") == ""


@pytest.mark.parametrize("first, second", [
    ("honour", "honor"), ("favoured", "favored"), ("organise", "organize"), ("centre", "center"),
    ("licence", "license"), ("labelling", "labeling"), ("per cent", "percent"),
    ("kilometres", "kilometers")])
def test_british_and_american_spellings_are_one_wording(first, second):
    assert spelling_variant(first, second) and spelling_variant(second, first)


@pytest.mark.parametrize("first, second", [
    ("1912", "1915"), ("northwestern", "northeastern"), ("austria", "australia"),
    ("smith", "smyth"), ("france", "spain"), ("bin", "bind"), ("honour", "honour")])
def test_other_edits_are_no_spelling_variant(first, second):
    assert not spelling_variant(first, second)


def test_the_telling_edits_hold_the_answer_else_a_number_else_every_edit_that_counts():
    edits = [("labour", "labor"), ("its", "their"), ("built", "made"), ("1912", "1895"),
             ("mary jones", "anne smith")]
    assert telling_edits(edits, ["Anne Smith"]) == [("mary jones", "anne smith")]
    assert telling_edits(edits, ["not in any edit"]) == [("1912", "1895")]
    assert telling_edits(edits[:3] + edits[4:], []) == [("built", "made"),
                                                        ("mary jones", "anne smith")]
    assert telling_edits([("labour", "labor"), ("its", "their")], ["Mary"]) == []

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from faithrag.llm.lookup import lookup_draft


def test_draft_is_what_followed_the_most_recent_earlier_occurrence():
    history = [1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3]
    assert lookup_draft(history, ngram=3, max_tokens=2) == [7, 8]
    assert lookup_draft(history, ngram=3, max_tokens=10) == [7, 8, 5, 1, 2, 3]


def test_no_draft_without_an_earlier_occurrence_or_budget():
    assert lookup_draft([1, 2, 3, 4], ngram=2, max_tokens=5) == []
    assert lookup_draft([1, 2, 1, 2], ngram=2, max_tokens=0) == []
    assert lookup_draft([1, 2], ngram=2, max_tokens=5) == []
    assert lookup_draft([], ngram=1, max_tokens=5) == []


def test_draft_may_run_into_the_tail_itself():
    assert lookup_draft([4, 4, 4], ngram=1, max_tokens=5) == [4]  # occurrence at 1, then the tail


@given(st.lists(st.integers(0, 4), max_size=60), st.integers(1, 4), st.integers(0, 12))
def test_draft_follows_an_occurrence_of_the_tail_and_none_later(history, ngram, max_tokens):
    draft = lookup_draft(history, ngram, max_tokens)
    assert len(draft) <= max_tokens
    n = len(history)
    starts = [s for s in range(n - ngram) if n > ngram and history[s:s + ngram] == history[-ngram:]]
    if not starts or max_tokens == 0:
        assert draft == []
    else:
        start = max(starts)
        assert draft == history[start + ngram:start + ngram + max_tokens]
        assert draft  # an earlier occurrence always has at least one token after it

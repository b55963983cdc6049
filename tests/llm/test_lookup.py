from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from faithrag.llm.lookup import LookupDrafter, lookup_draft


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


def test_drafter_grows_after_a_whole_draft_and_shrinks_to_what_was_kept():
    drafter = LookupDrafter(max_tokens=8, ngram=1, min_tokens=2)
    history = [7, 1, 2, 3, 4, 5, 6, 7, 8, 7]
    assert drafter.propose(history, budget=10) == [8, 7]  # most recent 7 is followed by 8, 7
    drafter.kept(offered=8, confirmed=2)
    assert drafter.size == 3
    assert drafter.propose([5, 1, 2, 3, 4, 5], budget=10) == [1, 2, 3]
    drafter.kept(offered=3, confirmed=3)
    assert drafter.size == 5
    for _ in range(3):
        drafter.kept(offered=5, confirmed=5)
    assert drafter.size == 8  # never above max_tokens
    drafter.kept(offered=8, confirmed=0)
    assert drafter.size == 2  # never below min_tokens
    assert drafter.propose([5, 1, 2, 3, 4, 5], budget=0) == []  # nothing past the token budget
    assert LookupDrafter(max_tokens=3, ngram=1).min_tokens == 3

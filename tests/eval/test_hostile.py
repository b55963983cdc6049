import pytest

from faithrag.errors import ConfigError
from faithrag.eval.hostile import HostileRetriever
from faithrag.retrieval import InMemoryRetriever
from faithrag.types import Passage

CLEAN = [Passage(f"c{i}", f"clean passage {i} about the bridge opening") for i in range(5)]
POISON = {"when did the bridge open": [Passage(f"p{i}", f"poison {i}: the bridge opened in 1921")
                                       for i in range(3)]}
QUERY = "when did the bridge open"


class Fixed:
    """A retriever with a fixed ranking and scores 1.0, 0.9, ..."""

    def retrieve(self, query, k):
        return [p.with_score(1.0 - i / 10) for i, p in enumerate(CLEAN[:k])]


def ids(passages):
    return [p.id for p in passages]


def test_poison_takes_the_top_ranks_and_pushes_clean_passages_out():
    result = HostileRetriever(Fixed(), POISON).retrieve(QUERY, 4)
    assert ids(result) == ["p0", "p1", "p2", "c0"]
    assert all(p.meta["poisoned"] for p in result[:3]) and "poisoned" not in result[3].meta
    assert [p.score for p in result] == [1.0, 1.0, 1.0, 1.0]  # each took the displaced score


def test_count_and_positions_are_configurable():
    result = HostileRetriever(Fixed(), POISON, positions=[1, 3]).retrieve(QUERY, 5)
    assert ids(result) == ["c0", "p0", "c1", "p1", "c2"]
    assert [p.score for p in result][1] == pytest.approx(0.9)
    assert ids(HostileRetriever(Fixed(), POISON, count=1).retrieve(QUERY, 3)) == ["p0", "c0", "c1"]
    assert ids(HostileRetriever(Fixed(), POISON, count=0).retrieve(QUERY, 2)) == ["c0", "c1"]
    # a position past the clean list appends
    assert ids(HostileRetriever(Fixed(), POISON, count=1, positions=[9]).retrieve(QUERY, 3)) == [
        "c0", "c1", "c2"]
    assert ids(HostileRetriever(Fixed(), POISON, count=1, positions=[2]).retrieve(QUERY, 3)) == [
        "c0", "c1", "p0"]


def test_queries_without_poison_are_untouched_and_poison_may_be_a_callable():
    assert ids(HostileRetriever(Fixed(), POISON).retrieve("other query", 2)) == ["c0", "c1"]
    calls = []
    hostile = HostileRetriever(Fixed(), lambda q: calls.append(q) or POISON.get(q, []), count=2)
    assert ids(hostile.retrieve(QUERY, 3)) == ["p0", "p1", "c0"] and calls == [QUERY]


def test_wraps_a_real_retriever_and_drops_clean_copies_of_the_poison():
    corpus = CLEAN + [Passage("dup", POISON[QUERY][0].text)]
    result = HostileRetriever(InMemoryRetriever(corpus), POISON, count=1).retrieve(QUERY, 6)
    assert result[0].id == "p0" and "dup" not in ids(result)
    assert len(result) == 6 and len({p.text for p in result}) == 6


@pytest.mark.parametrize("kwargs", [{"count": -1}, {"positions": [0, 0]},
                                    {"positions": [-1]}, {"count": 3, "positions": [0, 1]}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ConfigError):
        HostileRetriever(Fixed(), POISON, **kwargs)

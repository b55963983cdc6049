from cfrag_doubles import PASSAGES, QUESTION, KeywordEmbedder

from faithrag.methods.cfrag.dialectical import dialectical_retrieval
from faithrag.methods.cfrag.vectors import VectorMemo
from faithrag.types import Passage

SECOND = QUESTION.replace("first", "second")
P = {p.id: p for p in PASSAGES}
TWIN = Passage("armstrong-copy", P["armstrong"].text + " ", title="Apollo 11 timeline")


class ScriptedRetriever:
    def __init__(self, hits):
        self.hits = hits
        self.queries = []

    def retrieve(self, query, k):
        self.queries.append(query)
        return self.hits[query][:k]


def test_pool_merges_dedups_and_filters_by_the_best_query():
    retriever = ScriptedRetriever({
        QUESTION: [P["armstrong"], TWIN, P["paris"]],
        SECOND: [P["aldrin"], P["armstrong"]]})
    pool = dialectical_retrieval([QUESTION, SECOND], retriever, 3, VectorMemo(KeywordEmbedder()),
                                 dedup=0.95, min_relevance=0.1, max_evidence=10)
    ids = [p.id for p in pool.passages]
    assert sorted(ids) == ["aldrin", "armstrong"]
    assert pool.duplicates == [("armstrong-copy", "armstrong", 1.0)]
    assert [pid for pid, _ in pool.irrelevant] == ["paris"]  # no query shares a keyword
    assert pool.retrieved_by == {"armstrong": [0, 1], "aldrin": [1]}
    assert pool.relevance == sorted(pool.relevance, reverse=True)  # ordered by best relevance


def test_question_hits_replace_retrieval_for_the_question_and_the_cap_keeps_the_best():
    retriever = ScriptedRetriever({SECOND: [P["aldrin"], P["boot"], P["photos"]]})
    pool = dialectical_retrieval([QUESTION, SECOND], retriever, 3, VectorMemo(KeywordEmbedder()),
                                 dedup=0.95, min_relevance=0.0, max_evidence=2,
                                 question_hits=[P["armstrong"]])
    assert retriever.queries == [SECOND]
    assert len(pool.passages) == 2 and len(pool.over_cap) == 2
    # the Aldrin passage matches the counterfactual best of all: kept on that relevance
    assert "aldrin" in [p.id for p in pool.passages]


def test_no_hits_give_an_empty_pool():
    pool = dialectical_retrieval([QUESTION], ScriptedRetriever({QUESTION: []}), 3,
                                 VectorMemo(KeywordEmbedder()), 0.95, 0.1, 10)
    assert pool.passages == [] and pool.texts == []

from faithrag import registry
from faithrag.config import Config
from faithrag.llm.fake import FakeLLM
from faithrag.methods.scorer_rerank import ScorerReranker
from faithrag.types import Passage, Question, Trace


class KeywordScorer:
    name = "keyword"

    def score(self, query, passages, step=None):
        return [float(sum(word in p for word in query.split())) for p in passages]


def test_sorted_by_score_ties_in_incoming_order_scores_set():
    passages = [Passage("a", "nothing"), Passage("b", "bridge opened"), Passage("c", "zzz"),
                Passage("d", "the bridge")]
    trace = Trace()
    result = ScorerReranker(KeywordScorer(), "keyword").rerank(
        Question("bridge opened"), passages, trace)
    assert [p.id for p in result.passages] == ["b", "d", "a", "c"]
    assert [p.score for p in result.passages] == [2.0, 1.0, 0.0, 0.0]
    assert result.removed == []
    assert trace.steps[0].outputs["order"][0] == ["b", 2.0]
    assert passages[1].score is None  # inputs are not modified


def test_llm_judge_from_the_registry_scores_each_passage_with_one_call():
    llm = FakeLLM(choice_prior=lambda choice: 1.0 if choice == "Yes" else 0.0)
    config = Config.load(None, {"llm.backend": "fake"})
    reranker = registry.build("reranker", "llm_judge", llm, config)
    trace = Trace()
    result = reranker.rerank(Question("q?"), [Passage("a", "x"), Passage("b", "y")], trace)
    assert reranker.name == "llm_judge" and len(llm.calls) == 2
    assert [p.id for p in result.passages] == ["a", "b"]  # equal scores: order kept
    assert all(0.7 < p.score < 0.75 for p in result.passages)  # sigmoid(1)
    assert len(trace.steps[0].llm_calls) == 2


def test_bi_encoder_from_the_registry_puts_the_relevant_passage_first():
    config = Config.load(None, {"llm.backend": "fake", "use_cache": False, "llm.n_threads": 1})
    reranker = registry.build("reranker", "bi_encoder", FakeLLM(), config)
    passages = [Passage("cake", "Mix flour, sugar and eggs, then bake the cake for an hour."),
                Passage("bridge", "The Aldermoor Bridge over the river Wend opened in 1887.")]
    result = reranker.rerank(Question("When did the Aldermoor Bridge open?"), passages, Trace())
    assert [p.id for p in result.passages] == ["bridge", "cake"]
    assert result.passages[0].score > result.passages[1].score

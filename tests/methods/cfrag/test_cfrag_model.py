import pytest
from cfrag_doubles import PASSAGES, QUESTION

from faithrag import registry
from faithrag.config import Config
from faithrag.pipeline import Pipeline
from faithrag.retrieval import InMemoryRetriever
from faithrag.types import PARSE_OK


@pytest.mark.model
def test_tiny_model_end_to_end(tiny_gguf):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make setup)")
    from faithrag.llm.llamacpp import LlamaCppLLM

    config = Config.load(None, {"llm.n_threads": 1, "cfrag.counterfactual_tokens": 24,
                                "cfrag.draft_tokens": 24, "cfrag.m_subsets": 2,
                                "cfrag.scorer": "bi_encoder", "cfrag.use_confidence": True,
                                "cfrag.use_specificity": True, "retrieval.k": 3})
    llm = LlamaCppLLM("tiny", n_ctx=2048, n_threads=1)
    try:
        retriever = InMemoryRetriever(PASSAGES)
        pipeline = Pipeline(registry.build("generator", "cfrag", llm, config, retriever), retriever, k=3)
        result = pipeline.run(QUESTION)
    finally:
        llm.close()
    steps = {s.name: s for s in result.trace.steps}
    assert [s.name for s in result.trace.steps][:3] == [
        "InMemoryRetriever", "cfrag.counterfactuals", "cfrag.dialectical_retrieval"]
    drafts = steps["cfrag.drafts"]
    assert len(drafts.llm_calls) == len(drafts.outputs["hypotheses"]) >= 1
    assert drafts.prompt_tokens > 0 and drafts.completion_tokens > 0
    assert "cfrag.arbitration" in steps
    if result.answer.parse_status == PARSE_OK:
        assert result.answer.text and result.answer.meta["cfrag"]["decision"] in (
            "consensus", "synthesis")
    else:  # the tiny model may ignore the format: counted, not guessed
        assert result.answer.meta["cfrag"]["decision"] == "unparsable"

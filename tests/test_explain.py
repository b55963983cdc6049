"""`faithrag ask --explain`: the evidence, what the generator saw of it, the stages, the answer."""

from __future__ import annotations

from faithrag import FakeLLM, Passage, Pipeline
from faithrag.explain import render_explanation


def test_the_explanation_says_which_passages_the_generator_left_out_or_cut():
    passages = [Passage(f"p{i}", f"word {i} " * 60) for i in range(12)]
    result = Pipeline.from_config(llm=FakeLLM(default="a", context_window=512)).run(
        "q?", passages=passages)
    text = render_explanation(result)
    view = result.evidence
    assert "Evidence (12 passages given to the generator):" in text
    assert (f"the generator saw {len(view.seen)} of them; left out: {', '.join(view.dropped)}; "
            f"cut to fit: {view.cut[0]} (the model's context window (512 tokens") in text


def test_nothing_is_said_of_the_view_when_the_generator_saw_every_passage():
    result = Pipeline.from_config(llm=FakeLLM(default="a")).run(
        "q?", passages=[Passage("p1", "short")])
    assert "the generator saw" not in render_explanation(result)

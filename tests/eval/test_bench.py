import pytest

from faithrag.eval.bench import Rates, breakdown, measure_rates, render_breakdown
from faithrag.llm.fake import FakeLLM


def record(seconds, llm_seconds, prompt, generated):
    stage = {"stage": "generate", "name": "vanilla", "seconds": seconds,
             "llm_seconds": llm_seconds, "prompt_tokens": prompt, "completion_tokens": generated,
             "llm_calls": 1}
    return {"seconds": seconds, "trace": {"stages": [stage], "llm_seconds": llm_seconds,
                                          "prompt_tokens": prompt, "completion_tokens": generated,
                                          "llm_calls": 1}}


def test_floor_wall_ratio_and_non_llm_share():
    rates = Rates(prompt_tokens_per_s=100.0, generation_tokens_per_s=10.0, repeats=3)
    b = breakdown([record(4.0, 3.0, 200, 10), record(2.0, 2.0, 100, 0),
                   {"seconds": 9.0, "trace": {}}], rates)  # a failed item has no trace
    assert b["items"] == 2
    assert b["llm_floor_seconds"] == pytest.approx(300 / 100 + 10 / 10)
    assert b["wall_over_floor"] == pytest.approx(6.0 / 4.0)
    assert b["non_llm_share"] == pytest.approx(1.0 / 6.0)
    assert b["stages"]["generate/vanilla"]["seconds_per_item"] == pytest.approx(3.0)
    assert "wall/floor 1.50" in render_breakdown(b)


def test_calibration_uses_fresh_prompts():
    llm = FakeLLM(default="1 2 3")
    measure_rates(llm, repeats=2)
    prompts = [c.messages[-1].content for c in llm.calls if c.purpose == "calibrate_prompt"]
    assert len(prompts) == 2 and prompts[0] != prompts[1]

import pytest

from faithrag.types import Trace


def test_trace_step_records_time_and_llm_calls_even_when_the_stage_fails():
    trace = Trace()
    with trace.step("generate", "x", question="q") as step:
        step.record_llm("answer", 10, 3, 0.5)
    with pytest.raises(RuntimeError), trace.step("verify", "y"):
        raise RuntimeError("boom")
    assert [s.stage for s in trace.steps] == ["generate", "verify"]
    totals = trace.totals()
    assert totals["llm_calls"] == 1
    assert totals["prompt_tokens"] == 10 and totals["completion_tokens"] == 3
    assert trace.steps[0].inputs == {"question": "q"}
    summary = trace.summary()
    assert summary["stages"][0]["prompt_tokens"] == 10

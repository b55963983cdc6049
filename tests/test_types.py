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


def test_trace_gathers_the_conflicts_and_checks_of_its_steps():
    from faithrag.types import Conflict, ConflictCheck, ConflictSide

    trace = Trace()
    side_a = ConflictSide("Mutemath", "Mutemath recorded it.", ["p1"], "web")
    side_b = ConflictSide("The Beatles", "The Beatles recorded it.", ["p2"], "web")
    with trace.step("rerank", "x") as step:
        step.conflicts.append(Conflict("passage_vs_passage", "x", [side_a, side_b], "removed", 0.9))
        step.checks.append(ConflictCheck("passage_vs_passage", "x", "conflict"))
    with trace.step("verify", "y") as step:
        step.checks.append(ConflictCheck("context_vs_memory", "y", "could_not_tell"))
    assert [c.sides[1].answer for c in trace.conflicts] == ["The Beatles"]
    assert [c.status for c in trace.checks] == ["conflict", "could_not_tell"]
    assert trace.to_dict()["steps"][0]["conflicts"][0]["sides"][0]["passages"] == ["p1"]

"""The passages a response lists are exactly the ones in the generator's prompt: checked against
the prompt the model received, with 1,000 passages posted and a context window that holds a
fraction of them."""

from __future__ import annotations

from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Result
from faithrag.server import Limits
from faithrag.server.evidence import generator_view
from faithrag.types import Answer, Passage, Question, Trace


def prompt_of(llm: FakeLLM) -> str:
    (call,) = llm.calls
    return next(m.content for m in reversed(call.messages) if m.role == "user")


def test_a_thousand_posted_only_those_that_fit_are_listed_and_the_rest_counted(start_server):
    llm = FakeLLM(default="0417", context_window=4096)
    client = start_server(llm=llm, limits=Limits(max_passages=1000))
    posted = [{"id": f"r{i}", "text": f"Record {i}: the gate code of block {i} is {i:04d}."}
              for i in range(1000)]
    result = client.ask({"question": "What is the gate code of block 417?",
                         "passages": posted}).json()
    prompt = prompt_of(llm)
    seen, evidence = result["passages"], result["evidence"]
    assert 20 < len(seen) < 200
    assert [p["id"] for p in seen] == [p["id"] for p in posted[:len(seen)]]
    assert evidence == {"given": 1000, "seen": len(seen), "dropped": 1000 - len(seen),
                        "cut": [seen[-1]["id"]], "reason": evidence["reason"]}
    assert evidence["reason"].startswith("the model's context window (4096 tokens")
    for passage in seen:
        assert f"\n{passage['text'].strip()}\n</passage>" in prompt
    last_posted = posted[len(seen) - 1]["text"]
    assert last_posted.startswith(seen[-1]["text"]) and seen[-1]["text"] != last_posted
    assert posted[len(seen)]["text"] not in prompt  # the first dropped one is not in the prompt


def test_when_everything_fits_nothing_is_dropped(start_server):
    client = start_server(llm=FakeLLM(default="Canberra"))
    result = client.ask({"question": "q?", "passages": [{"text": "a"}, {"text": "b"}]}).json()
    assert [p["text"] for p in result["passages"]] == ["a", "b"]
    assert result["evidence"] == {"given": 2, "seen": 2, "dropped": 0, "cut": [], "reason": ""}


def test_a_method_that_drafts_from_subsets_lists_the_passages_in_some_subset():
    given = [Passage(f"p{i}", f"text {i}") for i in range(4)]
    trace = Trace()
    with trace.step("generate", "cfrag.drafts") as step:
        step.outputs = {"hypotheses": [{"n": 1, "evidence": ["p0", "p2"]},
                                       {"n": 2, "evidence": ["p2"]}]}
    view = generator_view(Result(Question("q?"), Answer("a"), given, [], trace),
                          FakeLLM())
    assert [p.id for p in view.passages] == ["p0", "p2"]
    assert view.summary["dropped"] == 2 and "subsets" in view.summary["reason"]

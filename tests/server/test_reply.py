"""A chat reply beyond the pipeline's answer (faithrag.server.reply): the final generation cut at
max_tokens and heard while it is decoded, the answer cut when no generation writes it as it is,
the JSON reply a schema asks for, and a schema refused before any model work."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faithrag.config import Config
from faithrag.llm.base import GenerationRequest, user_prompt
from faithrag.llm.fake import FakeLLM
from faithrag.methods.common import generate
from faithrag.methods.plain_answer import read_answer
from faithrag.pipeline import Pipeline
from faithrag.registry import PLAIN_RAG
from faithrag.server.ask_request import AskBody
from faithrag.server.errors import RequestError
from faithrag.server.reply import Reply, ReplyShape, check_schema, settled_answer
from faithrag.server.service import AskService
from faithrag.types import Answer, Question

CANBERRA = {"title": "Australia", "text": "Canberra has been the capital since 1913."}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"], "additionalProperties": False}


def service_for(llm, **settings) -> AskService:
    config = Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake", **settings})
    return AskService(config, llm, None, Pipeline.from_parts)


def ask(service, reply, **body):
    fields = {"question": "What is the capital of Australia?", "passages": [CANBERRA], **body}
    return service.ask(AskBody.model_validate(fields), reply=reply)


@given(st.lists(st.sampled_from(["Answer:", "answer: ", "Ans", " ", "\n", "\n\n", "Paris", "é",
                                 "x", "\t"]), max_size=8))
def test_the_settled_answer_only_grows_and_ends_as_the_plain_readers_answer(pieces):
    raw = "".join(pieces).encode()
    # what a backend shows after each byte-token (an incomplete character as U+FFFD)
    texts = [raw[:n].decode("utf-8", errors="replace") for n in range(len(raw) + 1)]
    final = read_answer(raw.decode(), Question("")).text
    settled = [settled_answer(text) for text in texts]
    assert all(later.startswith(earlier) for earlier, later in pairwise(settled))
    assert final.startswith(settled[-1])


@pytest.mark.parametrize("raw, settled", [
    ("Ans", ""), ("Answer:", ""), ("Answer: Par", "Par"), ("Paris ", "Paris"),
    ("Paris\nand more", "Paris"), ("  New York\n", "New York"), ("Answers vary", "Answers vary")])
def test_the_settled_answer_holds_back_what_may_still_change(raw, settled):
    assert settled_answer(raw) == settled


def test_the_plain_answer_is_capped_at_max_tokens_and_heard_as_it_grows():
    llm = FakeLLM(default="Answer: Canberra is the capital")
    heard: list[str] = []
    reply = Reply(ReplyShape(max_tokens=16), heard.append)
    result = ask(service_for(llm), reply)
    (call,) = llm.calls
    assert call.max_tokens == 16  # the generation itself was capped (one byte per token)
    assert (reply.content, reply.finish_reason) == ("Canberra", "length")
    assert result["answer"] == "Canberra" and "".join(heard) == "Canberra" == reply.sent
    assert result["trace"]["totals"]["completion_tokens"] == 16
    whole = Reply(ReplyShape())
    ask(service_for(FakeLLM(default="Canberra\n")), whole)
    assert (whole.content, whole.finish_reason) == ("Canberra", "stop")


def test_a_reply_that_ends_its_line_within_the_cap_is_not_cut():
    reply = Reply(ReplyShape(max_tokens=12))
    ask(service_for(FakeLLM(default="Canberra\nand then some")), reply)
    assert (reply.content, reply.finish_reason) == ("Canberra", "stop")


def test_an_answer_no_generation_writes_as_it_is_is_cut_whole_and_not_streamed():
    llm = FakeLLM(default="B")
    heard: list[str] = []
    reply = Reply(ReplyShape(max_tokens=4), heard.append)
    result = ask(service_for(llm), reply, choices=["Sydney", "Canberra"])
    assert result["answer"] == "Canberra" and not reply.live
    assert (reply.content, reply.finish_reason, heard) == ("Canb", "length", [])


def test_a_generator_whose_answer_is_not_its_plain_reading_gets_its_answer_as_the_reply(caplog):
    class Rewrites:
        name = "rewrites"

        def __init__(self, llm):
            self.llm = llm

        def generate(self, question, passages, trace):
            with trace.step("generate", self.name) as step:
                request = GenerationRequest(user_prompt(question.text), purpose="answer")
                generate(self.llm, [request], step)
                return Answer(text="Canberra, ACT")

    llm = FakeLLM(default="Canberra")
    service = AskService(Config.load(overrides={**PLAIN_RAG, "llm.backend": "fake"}), llm, None,
                         lambda config, llm, retriever: Pipeline(Rewrites(llm)))
    reply = Reply(ReplyShape())
    ask(service, reply)
    assert (reply.content, reply.finish_reason) == ("Canberra, ACT", "stop")
    assert "not the reading of the generation" in caplog.text


def test_a_schema_gets_a_json_reply_written_after_the_answer_and_recorded():
    llm = FakeLLM([("JSON schema of the reply", '{"answer": "Canberra"}')], default="Canberra")
    heard: list[str] = []
    reply = Reply(ReplyShape(schema=SCHEMA), heard.append)
    result = ask(service_for(llm), reply)
    assert json.loads(reply.content) == {"answer": "Canberra"} and reply.finish_reason == "stop"
    assert "".join(heard) == reply.content  # the JSON reply is the final generation
    answer_call, json_call = llm.calls
    assert answer_call.purpose == "answer" and json_call.schema == SCHEMA and "Canberra" in json_call.messages[-1].content
    steps = result["trace"]["steps"]
    assert [(s["stage"], s["name"]) for s in steps] == [("generate", "vanilla"),
                                                         ("reply", "json_schema")]
    assert steps[-1]["llm_calls"][0]["completion_tokens"] == len(reply.content)
    cut = Reply(ReplyShape(max_tokens=5, schema=SCHEMA))
    ask(service_for(llm), cut)
    assert (cut.content, cut.finish_reason) == ('{"ans', "length")


def test_a_reply_to_a_schema_that_is_not_json_is_a_502():
    reply = Reply(ReplyShape(schema=SCHEMA))
    with pytest.raises(RequestError, match="not JSON") as info:
        ask(service_for(FakeLLM(default="Canberra")), reply)
    assert info.value.status == 502


def test_a_schema_the_embedded_backend_cannot_follow_is_refused_before_any_model_work():
    pytest.importorskip("llama_cpp")
    config = Config.load(overrides={"llm.model": "tiny"})
    with pytest.raises(RequestError, match="Unrecognized schema") as info:
        check_schema(ReplyShape(schema={"type": "foo"}), config)
    assert info.value.status == 400
    check_schema(ReplyShape(schema=SCHEMA), config)
    # nothing checked where the embedded backend does not constrain
    check_schema(ReplyShape(schema={"type": "foo"}), Config.load(overrides={
        "llm.model": "tiny", "llm.constrain": False}))

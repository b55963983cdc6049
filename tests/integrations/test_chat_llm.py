"""ChatModelLLM: a framework's chat call as a faithrag LLM, generation only."""

from __future__ import annotations

import pytest

from faithrag import Passage, Pipeline
from faithrag.config import Config
from faithrag.errors import ConfigError, RuntimeUnavailableError
from faithrag.integrations.chat_llm import ChatModelLLM, ChatReply, check_text_only
from faithrag.llm.base import ChoiceRequest, GenerationRequest, Message, TokenBias, user_prompt


def echo(reply: str, **usage):
    calls = []

    def chat(messages):
        calls.append(list(messages))
        return ChatReply(reply, **usage)
    return chat, calls


def test_tokens_are_text_pieces_that_join_back_to_the_text():
    llm = ChatModelLLM("m", echo("")[0])
    text = "The Aldermoor Bridge opened in 18871, said_the blog!\n\n  Really?"
    ids = llm.tokenize(text)
    assert llm.detokenize(ids) == text
    assert [llm.detokenize([i]) for i in ids] == [
        "The", " Alderm", "oor", " Bridge", " opened", " in", " 188", "71", ",", " said", "_",
        "the", " blog", "!", "\n\n ", " Really", "?"]  # six letters, three digits at most
    assert llm.vocab_size == len(set(ids))
    assert llm.tokenize("The bridge") == llm.tokenize("The") + llm.tokenize(" bridge")
    assert llm.count_chat_tokens([Message("user", "The bridge")]) == 2 + 4


def test_a_request_is_one_chat_call_with_its_messages():
    chat, calls = echo("Conflict: None", prompt_tokens=40, completion_tokens=3)
    llm = ChatModelLLM("m", chat)
    messages = (Message("system", "Be brief."), Message("user", "Q?"), Message("assistant", "A"),
                Message("user", "Again?"))
    (completion,) = llm.generate([GenerationRequest(messages, max_tokens=16)])
    assert calls == [list(messages)]
    assert (completion.text, completion.finish_reason) == ("Conflict: None", "stop")
    assert (completion.prompt_tokens, completion.completion_tokens) == (40, 3)
    assert completion.warnings == []


def test_the_reply_is_cut_at_a_stop_string_and_at_max_tokens_with_counted_tokens():
    llm = ChatModelLLM("m", echo("one two three four\nSECOND LINE", completion_tokens=99)[0])
    (stopped,) = llm.generate([GenerationRequest(user_prompt("Q"), stop=("\n",))])
    assert (stopped.text, stopped.finish_reason) == ("one two three four", "stop")
    assert stopped.completion_tokens == 4  # the reported 99 counted the cut part
    (short,) = llm.generate([GenerationRequest(user_prompt("Q"), max_tokens=2)])
    assert (short.text, short.finish_reason, short.completion_tokens) == ("one two", "length", 2)
    assert short.prompt_tokens == llm.count_chat_tokens(user_prompt("Q"))


def test_a_structured_request_runs_unconstrained_and_says_so():
    llm = ChatModelLLM("m", echo("RELEVANCE: RELEVANT")[0])
    (completion,) = llm.generate([GenerationRequest(user_prompt("Q"), grammar='root ::= "x"')])
    assert completion.text == "RELEVANCE: RELEVANT"
    assert "cannot constrain" in completion.warnings[0]


def test_bias_and_option_scoring_are_refused_with_the_backends_that_can():
    chat, calls = echo("x")
    llm = ChatModelLLM("langchain:Chat", chat)
    with pytest.raises(RuntimeUnavailableError, match="takes no token bias") as error:
        llm.generate([GenerationRequest(user_prompt("Q"),
                                        bias=TokenBias.from_mapping({1: 2.0}))])
    assert "faithrag.load_llm" in error.value.hint and "backend='openai'" in error.value.hint
    assert not calls
    with pytest.raises(RuntimeUnavailableError, match="cannot score options"):
        llm.score_choices(ChoiceRequest(user_prompt("Q"), ("A", "B")))


@pytest.mark.parametrize("settings", [{"rerank.verdict": "support"},
                                      {"rerank.same_subject_check": True}])
def test_settings_that_score_options_are_refused_for_the_reranker_only(settings):
    config = Config.load(None, {"pipeline.rerank": "crossval", **settings})
    with pytest.raises(ConfigError, match="scores options") as error:
        check_text_only(config, "FaithragReranker")
    assert "FaithragReranker" in error.value.message
    assert "LLMConfig(model='default')" in error.value.hint
    check_text_only(Config.load(None, {"pipeline.verify": None, **settings}), "Verifier")
    check_text_only(Config.load(None, {"pipeline.rerank": "crossval"}), "FaithragReranker")


def test_crossval_runs_on_a_chat_model(bridge_script):
    calls = []

    def chat(messages):
        calls.append(messages)
        return ChatReply(bridge_script(messages[-1].content))
    pipeline = Pipeline.from_config(llm=ChatModelLLM("m", chat), rerank="crossval")
    passages = [Passage("history", "The Aldermoor Bridge opened in 1887."),
                Passage("blog", "A blog says the Aldermoor Bridge opened in 1921."),
                Passage("survey", "The Aldermoor Bridge has carried traffic since 1887.")]
    result = pipeline.rerank("When did the Aldermoor Bridge open?", passages)
    assert [r.passage.id for r in result.removed] == ["blog"]
    assert [p.id for p in result.passages] == ["survey", "history"]  # the script reverses
    assert len(calls) >= 3

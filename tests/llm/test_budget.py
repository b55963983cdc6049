import pytest

from faithrag.errors import InputTooLargeError
from faithrag.llm.base import Message
from faithrag.llm.budget import fit_evidence
from faithrag.llm.fake import FakeLLM


def render(question):
    def r(texts):
        return (Message("user", "\n".join(texts) + "\nQ: " + question),)
    return r


def test_everything_fits_untouched():
    llm = FakeLLM(context_window=1000)
    fitted = fit_evidence(llm, render("why?"), ["a" * 100, "b" * 100], reserve=50)
    assert fitted.evidence == ["a" * 100, "b" * 100] and not fitted.warnings


def test_evidence_is_cut_but_question_is_kept():
    llm = FakeLLM(context_window=300)
    question = "what is the answer to the long question?"
    fitted = fit_evidence(llm, render(question), ["a" * 150, "b" * 150, "c" * 150], reserve=50)
    assert fitted.evidence[0] == "a" * 150
    assert 0 < len(fitted.evidence[1]) < 150 and set(fitted.evidence[1]) == {"b"}
    assert len(fitted.evidence) == 2
    assert question in fitted.messages[-1].content
    assert llm.count_chat_tokens(fitted.messages) <= 250
    assert "truncated" in fitted.warnings[0]


def test_question_alone_too_long_raises():
    llm = FakeLLM(context_window=100)
    with pytest.raises(InputTooLargeError):
        fit_evidence(llm, render("x" * 200), ["evidence"], reserve=10)

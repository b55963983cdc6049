import pytest

from faithrag.config import Config
from faithrag.eval.answer_cache import AnswerCache, backend_identity
from faithrag.llm.base import ChoiceRequest, GenerationRequest, TokenBias, user_prompt
from faithrag.llm.fake import FakeLLM

IDENTITY = {"model_sha256": "abc", "llm": {"n_batch": 512}, "llama_cpp_python": "0.3"}


def ask(text, **options):
    return GenerationRequest(user_prompt(text), **{"max_tokens": 8, **options})


def echo():
    return FakeLLM(lambda request: request.messages[-1].content.upper())


def test_a_call_seen_before_is_read_back_marked_cached(tmp_path):
    llm = echo()
    [first] = AnswerCache(llm, tmp_path, IDENTITY).generate([ask("bridge", purpose="answer")])
    other = FakeLLM(lambda request: "something else")
    [again] = AnswerCache(other, tmp_path, IDENTITY).generate([ask("bridge", purpose="draft")])
    assert (again.text, again.seconds, again.prompt_tokens) == \
        (first.text, first.seconds, first.prompt_tokens) and first.text == "BRIDGE"
    assert again.cached and not first.cached
    assert len(llm.calls) == 1 and other.calls == []


@pytest.mark.parametrize("call", [
    [ask("b")],  # alone: the second request of the kept call was read after the first
    [ask("a"), ask("b", max_tokens=4)],
    [ask("a", bias=TokenBias.from_mapping({1: 2.0})), ask("b")],
    [ask("a"), ask("b", stop=("\n",))],
])
def test_any_other_call_is_computed(tmp_path, call):
    llm = echo()
    cache = AnswerCache(llm, tmp_path, IDENTITY)
    cache.generate([ask("a"), ask("b")])
    cache.generate(call)
    cache.generate([ask("a"), ask("b")])
    assert len(llm.generate_calls) == 2


def test_another_model_or_setting_is_another_key(tmp_path):
    llm = echo()
    for identity in (IDENTITY, {**IDENTITY, "model_sha256": "def"},
                     {**IDENTITY, "llm": {"n_batch": 256}}, IDENTITY):
        AnswerCache(llm, tmp_path, identity).generate([ask("a")])
    assert len(llm.generate_calls) == 3


def test_sampled_calls_are_never_kept(tmp_path):
    llm = echo()
    cache = AnswerCache(llm, tmp_path, IDENTITY)
    for _ in range(2):
        cache.generate([ask("a", temperature=0.7, seed=1)])
    assert len(llm.generate_calls) == 2 and not any(tmp_path.rglob("*.json"))


def test_a_damaged_entry_is_computed_again(tmp_path):
    llm = echo()
    cache = AnswerCache(llm, tmp_path, IDENTITY)
    cache.generate([ask("a")])
    [entry] = tmp_path.rglob("*.json")
    entry.write_text('{"completions": [')
    [completion] = cache.generate([ask("a")])
    assert completion.text == "A" and not completion.cached and len(llm.generate_calls) == 2


def test_choice_scoring_goes_to_the_model_uncached(tmp_path):
    llm = FakeLLM(choice_prior=len)
    cache = AnswerCache(llm, tmp_path, IDENTITY)
    request = ChoiceRequest(user_prompt("pick"), ("a", "bbb"))
    assert cache.score_choices(request).best == 1 and cache.score_choices(request).best == 1
    assert len(llm.calls) == 2 and cache.name == llm.name
    assert cache.context_window == llm.context_window
    assert cache.detokenize(cache.tokenize("bridge")) == "bridge"


def test_backend_identity_holds_what_changes_numbers_not_how_replies_travel():
    base = backend_identity(Config(), "abc")
    assert backend_identity(Config.load(None, {"llm.timeout": 5.0}), "abc") == base
    assert backend_identity(Config.load(None, {"llm.n_batch": 256}), "abc") != base
    assert backend_identity(Config(), "def") != base
    assert "api_key" not in base["llm"]

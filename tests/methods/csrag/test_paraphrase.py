from hypothesis import given
from hypothesis import strategies as st

from faithrag.llm.fake import FakeLLM
from faithrag.llm.replicas import Replicas
from faithrag.methods.csrag.cache import JsonCache
from faithrag.methods.csrag.paraphrase import (
    Paraphraser,
    Paraphrases,
    keep_rewrites,
    parse_paraphrases,
)
from faithrag.types import Passage, Step, Trace

TWO = "[PARAPHRASE]: Sydney became the capital in 2031.\n[PARAPHRASE]: In 2031 the capital moved to Sydney."


def by_style(request):
    """One rewrite per request, worded by the style the request asks for."""
    if "simple words" in request.messages[-1].content:
        return "[PARAPHRASE]: Sydney became the capital in 2031."
    return "[PARAPHRASE]: In 2031 the capital moved to Sydney."


def test_two_marked_rewrites_are_read():
    assert parse_paraphrases(TWO) == ["Sydney became the capital in 2031.",
                                      "In 2031 the capital moved to Sydney."]


def test_marker_variants_are_tolerated_and_extra_rewrites_dropped():
    raw = ("**[Paraphrase 1]:** one.\n\n[paraphrase2] two\n[PARAPHRASE]: three")
    assert parse_paraphrases(raw) == ["one.", "two"]


def test_unmarked_output_is_not_a_paraphrase():
    assert parse_paraphrases("Sydney became the capital in 2031.") == []
    assert Paraphrases([]).status == "failed"
    assert Paraphrases(["x"]).status == "partial"


@given(st.text(max_size=300))
def test_parser_never_fails(raw):
    texts = parse_paraphrases(raw)
    assert len(texts) <= 2 and all(t and "\n" not in t for t in texts)


@given(st.lists(st.text(alphabet="abc xyz.,0123", min_size=1, max_size=30)
                .filter(lambda s: s.strip(" *")), min_size=2, max_size=2))
def test_marked_rewrites_come_back(rewrites):
    raw = "\n".join(f"[PARAPHRASE]: {r}" for r in rewrites)
    assert parse_paraphrases(raw) == [" ".join(r.split()).strip(" *") for r in rewrites]


def test_copies_and_repeats_are_not_rewrites():
    passage = "Sydney is the capital."
    outputs = ["[PARAPHRASE]: sydney is  the capital.", "[PARAPHRASE]: The capital is Sydney.",
               "[PARAPHRASE]: the capital is Sydney.", "no marker"]
    assert keep_rewrites(passage, outputs) == ["The capital is Sydney."]


def test_uncached_passages_go_in_one_batched_call_and_are_cached(tmp_path):
    calls = []

    def respond(request):
        calls.append(request)
        return by_style(request)
    llm = FakeLLM(respond)
    cache = JsonCache(tmp_path)
    passages = [Passage("a", "Sydney is the capital."), Passage("b", "It moved in 2031.")]
    trace = Trace()
    with trace.step("paraphrase", "csrag") as step:
        first = Paraphraser(llm, 512, cache).paraphrase(passages, step)
    assert [p.status for p in first] == ["ok", "ok"] and not any(p.cached for p in first)
    assert len(llm.generate_calls) == 1 and len(llm.generate_calls[0]) == 4  # 2 styles each
    with trace.step("paraphrase", "csrag") as step:
        second = Paraphraser(llm, 512, cache).paraphrase(passages, step)
    assert all(p.cached for p in second) and [p.texts for p in second] == [p.texts for p in first]
    assert len(calls) == 4  # nothing new was asked


def test_cache_key_covers_model_and_text(tmp_path):
    cache = JsonCache(tmp_path)
    passage = [Passage("a", "Sydney is the capital.")]
    trace = Trace()
    with trace.step("p", "csrag") as step:
        Paraphraser(FakeLLM(by_style), 512, cache).paraphrase(passage, step)
        other = FakeLLM(default="[PARAPHRASE]: other")
        other.name = "other-model"
        assert Paraphraser(other, 512, cache).paraphrase(passage, step)[0].texts == ["other"]


def test_damaged_cache_entry_is_recomputed(tmp_path):
    cache = JsonCache(tmp_path)
    trace = Trace()
    passage = [Passage("a", "Sydney is the capital.")]
    with trace.step("p", "csrag") as step:
        Paraphraser(FakeLLM(by_style), 512, cache).paraphrase(passage, step)
        for path in tmp_path.rglob("*.json"):
            path.write_text("{not json")
        again = Paraphraser(FakeLLM(by_style), 512, cache).paraphrase(passage, step)
    assert again[0].status == "ok" and not again[0].cached


def test_passage_too_long_to_paraphrase_is_used_as_is():
    llm = FakeLLM(default=TWO, context_window=300)
    trace = Trace()
    with trace.step("p", "csrag") as step:
        out = Paraphraser(llm, 512).paraphrase([Passage("a", "x" * 400)], step)
    assert out[0].status == "failed" and not llm.calls and "no room" in step.warnings[0]


def test_truncated_output_is_flagged():
    llm = FakeLLM(default="[PARAPHRASE]: " + "word " * 200)
    trace = Trace()
    with trace.step("p", "csrag") as step:
        out = Paraphraser(llm, 80).paraphrase([Passage("a", "short text")], step)
    assert out[0].truncated


def test_replicas_of_a_model_share_its_cache(tmp_path):
    cache = JsonCache(tmp_path)
    passage = [Passage("a", "Sydney is the capital.")]
    trace = Trace()
    with trace.step("p", "csrag") as step:
        first = Paraphraser(FakeLLM(by_style), 512, cache).paraphrase(passage, step)
        copies = Replicas([FakeLLM(default="[PARAPHRASE]: never asked") for _ in range(2)])
        again = Paraphraser(copies, 512, cache).paraphrase(passage, step)
    assert again[0].cached and again[0].texts == first[0].texts


def test_rewrites_cut_by_a_small_window_are_not_served_to_a_larger_one(tmp_path):
    text = "Since 2031 the capital of Australia is Sydney, says the gazette. " * 3
    passage = Passage("p", text)
    rewrite = "[PARAPHRASE]: " + text.replace("says", "states")

    def paraphrase(window, cache):
        llm = FakeLLM(lambda r: rewrite, context_window=window)
        return Paraphraser(llm, 1024, cache).paraphrase([passage], Step("paraphrase", "csrag"))[0]

    cache = JsonCache(tmp_path)
    assert paraphrase(700, cache).truncated  # the window cut both rewrites
    assert paraphrase(4096, cache) == paraphrase(4096, None)  # not the cut ones from the cache
    assert paraphrase(4096, cache).cached  # a roomy window's entry is keyed as before

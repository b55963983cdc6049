import json
from dataclasses import replace

import pytest

from faithrag import registry
from faithrag.cli import main
from faithrag.config import Config
from faithrag.errors import ConfigError, ModelNotFoundError
from faithrag.eval.hostile import HostileRetriever
from faithrag.llm.fake import FakeLLM
from faithrag.methods.antisyco import AntiSycophancyVerifier
from faithrag.pipeline import Pipeline
from faithrag.retrieval import Index, InMemoryRetriever
from faithrag.types import Answer, Passage, Question, Trace

KB = [Passage("kb1", "Penicillin was discovered in 1928 by Alexander Fleming in London.",
              "Penicillin"),
      Passage("kb2", "Paris is the capital of France.", "France"),
      Passage("kb3", "Louis Pasteur, a French chemist, died in 1895.", "Pasteur")]
POISON = [Passage("r1", "Penicillin was discovered by Louis Pasteur.", "History")]
QUESTION = Question("Who discovered penicillin?")

GOOD_REFLECTION = {"relevance": "RELEVANCE: RELEVANT\nSCORE: 0.9",
                   "support": "SUPPORT: SUPPORTED"}
BAD_REFLECTION = {"relevance": "RELEVANCE: IRRELEVANT\nSCORE: 0.1",
                  "support": "SUPPORT: UNSUPPORTED"}


class Scripted(FakeLLM):
    """Replies by request purpose; records how many requests each generate() call carried."""

    def __init__(self, replies):
        super().__init__(lambda request: replies[request.purpose])
        self.batches = []

    def generate(self, requests):
        self.batches.append([r.purpose for r in requests])
        return super().generate(requests)


class Recording(Scripted):
    """Keeps the last request of each purpose."""

    def __init__(self, replies):
        super().__init__(replies)
        self.requests = {}

    def generate(self, requests):
        self.requests.update({r.purpose: r for r in requests})
        return super().generate(requests)


def replies(**overrides):
    base = {"answer": "Louis Pasteur", **GOOD_REFLECTION,
            "claims": "- Louis Pasteur discovered penicillin.",
            "contradiction": "ANSWER: NOT STATED",
            "repair": "Alexander Fleming", "fallback": "Alexander Fleming"}
    return {**base, **overrides}


def verifier(llm, **kwargs):
    # FakeLLM tokens are bytes: give the judgements room for a two-line reply
    return AntiSycophancyVerifier(llm, InMemoryRetriever(KB), judge_tokens=64, **kwargs)


def verify(llm, draft="Louis Pasteur", passages=POISON, question=QUESTION, **kwargs):
    trace = Trace()
    answer = verifier(llm, **kwargs).verify(question, passages, Answer(draft), trace)
    return answer, trace


def test_pass_keeps_the_draft_and_batches_the_reflection():
    llm = Scripted(replies(answer="Alexander Fleming", contradiction="ANSWER: Alexander Fleming"))
    answer, trace = verify(llm, draft="Alexander Fleming", judgements="all")
    assert answer.text == "Alexander Fleming" and answer.meta["decision"] == "PASS"
    assert answer.meta["confirmed_by_trusted_kb"]  # every claim consistent with the KB
    assert ["relevance", "support"] in llm.batches  # two independent judgements, one call
    assert not any("repair" in b or "fallback" in b for b in llm.batches)
    assert [s.name for s in trace.steps] == ["antisyco/reflect", "antisyco/claims",
                                             "antisyco/falsify", "antisyco/decide"]
    assert trace.steps[-1].decision == "PASS"
    assert answer.meta["claims"][0]["verdict"] == "CONSISTENT"
    assert answer.meta["unparsable"] == 0


def test_a_repair_answers_with_the_reference_answer_of_the_contradicting_passages():
    llm = Scripted(replies(contradiction="ANSWER: Alexander Fleming", repair="unused"))
    answer, trace = verify(llm)
    assert answer.text == "Alexander Fleming" and answer.meta["decision"] == "REPAIR"
    assert not answer.meta["confirmed_by_trusted_kb"]
    assert llm.batches == [["contradiction"]]  # no repair request
    assert "reference answer" in answer.meta["reasons"][-1]
    assert [s.name for s in trace.steps] == ["antisyco/claims", "antisyco/falsify",
                                             "antisyco/reflect", "antisyco/decide"]
    assert trace.steps[-1].decision == "REPAIR" and not trace.steps[-1].llm_calls


@pytest.mark.parametrize("question, claims, contradiction", [
    # the reference answer names no option
    (Question("Who discovered penicillin?", choices=["Louis Pasteur", "Alexander Fleming"]),
     "- Louis Pasteur discovered penicillin.", "ANSWER: London"),
    # two contradicted claims whose trusted passages answer differently
    (QUESTION, "- Louis Pasteur discovered penicillin.\n- Paris is in France.",
     ["ANSWER: Alexander Fleming", "ANSWER: Paris"]),
])
def test_a_repair_asks_again_when_the_reference_answers_cannot_be_the_answer(
        question, claims, contradiction):
    def reply(request):
        if request.purpose != "contradiction":
            return replies(claims=claims, repair="A" if question.choices else
                           "Alexander Fleming")[request.purpose]
        if isinstance(contradiction, str):
            return contradiction
        return contradiction[0] if "France" not in request.messages[-1].content else \
            contradiction[1]
    llm = FakeLLM(reply)
    trace = Trace()
    answer = verifier(llm, extract_claims="always", max_claims=2).verify(
        question, POISON, Answer("Louis Pasteur"), trace)
    assert answer.meta["decision"] == "REPAIR"
    assert [c.purpose for c in trace.steps[-1].llm_calls] == ["repair"]
    assert "asking again" in answer.meta["reasons"][-1]


def test_contradicted_claim_is_repaired_from_the_trusted_passages_only():
    llm = Scripted(replies(contradiction="ANSWER: Alexander Fleming"))
    answer, trace = verify(llm, repair="reanswer")
    assert answer.text == "Alexander Fleming" and answer.meta["decision"] == "REPAIR"
    assert answer.meta["draft"] == "Louis Pasteur"
    check = answer.meta["claims"][0]
    assert check["score"] == 1.0 and check["reference"] == "Alexander Fleming"
    assert "kb1" in check["evidence"]
    repair = next(c for c in llm.calls if c.purpose == "repair").messages[-1].content
    assert "Alexander Fleming" in repair and POISON[0].text not in repair
    # neither the refuted draft nor its claim is offered to copy
    assert '"Louis Pasteur"' not in repair and "Pasteur discovered" not in repair
    assert any("contradicted" in r for r in answer.meta["reasons"])
    assert trace.steps[-1].llm_calls[0].purpose == "repair"


def test_claims_are_checked_in_one_batched_call_against_their_own_anti_context():
    llm = Scripted(replies(claims="- Louis Pasteur discovered penicillin.\n- Paris is in France.",
                           contradiction="ANSWER: NOT STATED"))
    answer, _ = verify(llm, extract_claims="always")
    assert ["contradiction", "contradiction"] in llm.batches
    assert [c["claim"] for c in answer.meta["claims"]] == [
        "Louis Pasteur discovered penicillin.", "Paris is in France."]
    assert answer.meta["claims"][1]["evidence"][0] == "kb2"
    assert answer.meta["decision"] == "PASS"  # NOT STATED contradicts nothing


@pytest.mark.parametrize("draft, extracted", [
    ("Louis Pasteur", False), ("Louis Pasteur, the French chemist", False),
    ("Louis Pasteur. He was a French chemist.", True),
    ("Louis Pasteur discovered it in a laboratory in Paris in 1928", True)])
def test_a_short_draft_is_its_own_claim_without_a_call(draft, extracted):
    llm = Scripted(replies(contradiction="ANSWER: Louis Pasteur"))
    answer, trace = verify(llm, draft=draft, short_draft_words=8)
    assert any("claims" in batch for batch in llm.batches) == extracted
    claims = [c["claim"] for c in answer.meta["claims"]]
    assert claims == (["Louis Pasteur discovered penicillin."] if extracted else
                      [f'The answer to "Who discovered penicillin?" is {draft}.'])
    assert "antisyco/claims" in [s.name for s in trace.steps]
    assert answer.meta["unparsable"] == 0


def test_every_draft_is_restated_as_claims_when_asked():
    llm = Scripted(replies())
    answer, _ = verify(llm, extract_claims="always")
    assert ["claims"] in llm.batches
    assert answer.meta["claims"][0]["claim"] == "Louis Pasteur discovered penicillin."


def test_the_reflection_begins_as_the_draft_prompt_and_marks_it_recurring():
    from faithrag.methods.vanilla import answer_plain
    llm = Recording(replies())
    trace = Trace()
    with trace.step("generate", "vanilla") as step:
        answer_plain(llm, QUESTION, POISON, step, 48)
    verifier(llm, judgements="all").verify(QUESTION, POISON, Answer("Louis Pasteur"), trace)
    draft, relevance, support = (llm.requests[p] for p in ("answer", "relevance", "support"))
    for request in (draft, relevance, support):
        assert request.cache_prefix == 1 and request.messages[0] == draft.messages[0]
        assert request.keep_prefix and request.cache_prefix_text == draft.cache_prefix_text
        assert request.messages[1].content.startswith(draft.cache_prefix_text)
    assert "Passages:" in draft.cache_prefix_text and QUESTION.text in draft.cache_prefix_text
    assert "RELEVANCE:" in relevance.messages[1].content
    assert "Proposed answer: Louis Pasteur" in support.messages[1].content


def test_without_reuse_the_reflection_has_its_own_prompt():
    llm = Recording(replies())
    verify(llm, reuse_draft_reading=False)
    relevance = llm.requests["relevance"]
    assert relevance.messages[0].content.startswith("You audit the evidence")
    assert relevance.cache_prefix == 0 and not relevance.cache_prefix_text
    assert not relevance.keep_prefix


def test_falsification_first_and_only_the_judgements_the_decision_needs():
    relevant = Scripted(replies())  # the knowledge base does not state the answer
    answer, trace = verify(relevant)
    assert relevant.batches == [["contradiction"], ["relevance"]]  # relevant: support not asked
    assert [s.name for s in trace.steps] == ["antisyco/claims", "antisyco/falsify",
                                             "antisyco/reflect", "antisyco/decide"]
    assert (answer.meta["decision"], answer.meta["support"]) == ("PASS", None)
    assert answer.meta["unparsable"] == 0 and "support not asked" in answer.meta["reasons"][0]
    assert trace.steps[2].outputs["not_asked"] == ["support"]

    irrelevant = Scripted(replies(**BAD_REFLECTION))
    answer, _ = verify(irrelevant)
    assert irrelevant.batches == [["contradiction"], ["relevance"], ["support"], ["fallback"]]
    assert answer.meta["decision"] == "FALLBACK"

    confirmed = Scripted(replies(contradiction="ANSWER: Louis Pasteur", **BAD_REFLECTION))
    answer, trace = verify(confirmed)
    assert confirmed.batches == [["contradiction"]]  # FALLBACK cannot follow: no reflection
    assert answer.meta["decision"] == "PASS" and answer.text == "Louis Pasteur"
    assert answer.meta["claims"][0]["verdict"] == "CONSISTENT"
    assert "confirmed by the trusted knowledge base" in answer.meta["reasons"][0]
    assert "relevance not asked" in answer.meta["reasons"][0]
    assert "confirmed every claim" in trace.steps[2].outputs["why_not_asked"]
    assert [(c.kind, c.status) for c in trace.checks] == [
        ("contradicted_by_trusted_kb", "no_conflict")]  # relevance not judged, not reported

    contradicted = Scripted(replies(contradiction="ANSWER: Alexander Fleming"))
    answer, trace = verify(contradicted, repair="reanswer")
    assert contradicted.batches == [["contradiction"], ["repair"]]  # no reflection
    assert answer.meta["decision"] == "REPAIR" and answer.meta["unparsable"] == 0
    assert trace.steps[2].name == "antisyco/reflect" and not trace.steps[2].llm_calls
    assert [c.kind for c in trace.checks] == ["contradicted_by_trusted_kb"]


def test_the_papers_rule_falls_back_even_on_a_confirmed_draft():
    for judgements in ("needed", "all"):
        llm = Scripted(replies(contradiction="ANSWER: Louis Pasteur", **BAD_REFLECTION))
        answer, _ = verify(llm, judgements=judgements, fallback_when_confirmed=True)
        assert answer.meta["decision"] == "FALLBACK" and answer.text == "Alexander Fleming"
        llm = Scripted(replies(contradiction="ANSWER: Louis Pasteur", **BAD_REFLECTION))
        answer, _ = verify(llm, judgements=judgements)  # the default keeps it, asked or not
        assert answer.meta["decision"] == "PASS" and answer.text == "Louis Pasteur"


def test_irrelevant_and_unsupported_falls_back_without_the_retrieved_passages():
    llm = Scripted(replies(**BAD_REFLECTION))
    answer, _ = verify(llm)
    assert answer.meta["decision"] == "FALLBACK" and answer.text == "Alexander Fleming"
    fallback = next(c for c in llm.calls if c.purpose == "fallback").messages[-1].content
    assert "<passage" not in fallback and QUESTION.text in fallback


def test_repair_goes_before_fallback():
    llm = Scripted(replies(**BAD_REFLECTION, contradiction="ANSWER: Alexander Fleming"))
    assert verify(llm)[0].meta["decision"] == "REPAIR"


def test_an_answer_the_knowledge_base_does_not_hold_contradicts_nothing():
    llm = Scripted(replies(contradiction="ANSWER: Marie Curie"))  # not in the anti-context
    answer, _ = verify(llm)
    assert answer.meta["decision"] == "PASS"
    assert answer.meta["claims"][0]["verdict"] == "UNRELATED"


def test_thresholds_come_from_the_config(tmp_path):
    (tmp_path / "kb.md").write_text(" ".join(p.text for p in KB))
    judge = replies(**BAD_REFLECTION, contradiction="VERDICT: CONTRADICTED\nSCORE: 0.6")

    def decide(**settings):
        config = Config.load(None, {"antisyco.kb": str(tmp_path), "antisyco.judge_tokens": 64,
                                    "antisyco.contradiction": "judge",
                                    **{f"antisyco.{k}": v for k, v in settings.items()}})
        stage = registry.build("verifier", "antisyco", Scripted(judge), config)
        return stage.verify(QUESTION, POISON, Answer("Louis Pasteur"), Trace()).meta["decision"]

    assert decide() == "REPAIR"
    assert decide(contradiction_threshold=0.7) == "FALLBACK"
    assert decide(contradiction_threshold=0.7, relevance_threshold=0.05) == "PASS"


def test_unreadable_judgements_are_counted_and_never_intervene():
    llm = Scripted(replies(relevance="hmm", support="I think so", claims="***",
                           contradiction="VERDICT: maybe"))
    answer, trace = verify(llm, contradiction="judge", extract_claims="always",
                           judgements="all")
    assert answer.meta["decision"] == "PASS" and answer.text == "Louis Pasteur"
    assert answer.meta["unparsable"] == 5
    assert answer.meta["unparsable_fields"] == [
        "relevance label", "relevance score", "support label", "claim list",
        "claim 1 contradiction"]
    assert answer.meta["claims"][0]["claim"] == (
        'The answer to "Who discovered penicillin?" is Louis Pasteur.')
    assert len(trace.warnings) == 5 and any("unreadable" in r for r in answer.meta["reasons"])


def test_unreadable_reference_answer_is_counted():
    answer, _ = verify(Scripted(replies(contradiction="...")))
    assert answer.meta["unparsable_fields"] == ["claim 1 contradiction"]
    assert answer.meta["claims"][0]["score"] is None


def test_without_retrieved_passages_reflection_needs_no_llm_call():
    llm = Scripted(replies())
    answer, trace = verify(llm, passages=[])
    assert not trace.steps[0].llm_calls
    assert answer.meta["relevance"] == 0.0 and answer.meta["support"] == "UNSUPPORTED"
    assert answer.meta["decision"] == "FALLBACK"


def test_multiple_choice_repair_names_an_option():
    question = Question("Who discovered penicillin?",
                        choices=["Louis Pasteur", "Alexander Fleming"])
    llm = Scripted(replies(contradiction="ANSWER: Alexander Fleming", repair="B"))
    answer, _ = verify(llm, question=question)
    assert answer.choice_index == 1 and answer.text == "Alexander Fleming"


COMPARISON = Question("Who was born first, Alexander Fleming or Louis Pasteur?")
BIRTHS = [Passage("k", "Louis Pasteur was born in 1822. Alexander Fleming was born in 1881.")]


@pytest.mark.parametrize("claims", ["- Alexander Fleming was born before Louis Pasteur.",
                                    "***"])  # the second: the default claim quotes the question
def test_qa_mode_compares_the_reference_answer_with_the_draft_not_the_claim(claims):
    llm = Scripted(replies(claims=claims, contradiction="ANSWER: Louis Pasteur",
                           repair="Louis Pasteur"))
    stage = AntiSycophancyVerifier(llm, InMemoryRetriever(BIRTHS), judge_tokens=64)
    answer = stage.verify(COMPARISON, POISON, Answer("Alexander Fleming"), Trace())
    assert answer.meta["claims"][0]["score"] == 1.0
    assert answer.meta["decision"] == "REPAIR" and answer.text == "Louis Pasteur"


@pytest.mark.parametrize("reply", ["VERDICT: perhaps\nSCORE: 0.9",
                                   "VERDICT: CONSISTENT\nSCORE: 0.9",
                                   "VERDICT: CONTRADICTED\nSCORE: 0.1"])
def test_judge_mode_acts_only_on_a_verdict_that_agrees_with_its_score(reply):
    llm = Scripted(replies(contradiction=reply, repair="X"))
    answer, _ = verify(llm, draft="Alexander Fleming", contradiction="judge")
    assert answer.meta["decision"] == "PASS" and answer.text == "Alexander Fleming"
    assert answer.meta["unparsable"] == 1


def test_judge_mode_repairs_on_an_agreeing_contradiction():
    llm = Scripted(replies(contradiction="VERDICT: CONTRADICTED\nSCORE: 0.9"))
    answer, _ = verify(llm, contradiction="judge")
    assert answer.meta["decision"] == "REPAIR" and answer.meta["unparsable"] == 0


def test_factory_needs_a_separate_trusted_knowledge_base(tmp_path):
    with pytest.raises(ConfigError, match="trusted knowledge base"):
        registry.build("verifier", "antisyco", FakeLLM(), Config())
    index = Index.build(KB, tmp_path / "idx")
    config = Config.load(None, {"antisyco.kb": str(tmp_path / "idx")})
    with pytest.raises(ConfigError, match="is the index being verified"):
        registry.build("verifier", "antisyco", FakeLLM(), config, index)
    with pytest.raises(ConfigError, match="not found"):
        registry.build("verifier", "antisyco", FakeLLM(), Config.load(None, {"antisyco.kb": "/nonexistent"}))
    with pytest.raises(ConfigError, match="is the index being verified"):  # poison unwrapped
        registry.build("verifier", "antisyco", FakeLLM(), config, HostileRetriever(index, {}))
    stage = registry.build("verifier", "antisyco", FakeLLM(), config, InMemoryRetriever(POISON))
    assert stage.knowledge_base.retrieve("Fleming", 1)[0].id == "kb1"


def test_pipeline_runs_the_verifier_after_the_generator(tmp_path):
    (tmp_path / "kb.md").write_text(KB[0].text)
    config = Config.load(None, {"antisyco.kb": str(tmp_path), "antisyco.judge_tokens": 64,
                                "pipeline.verify": "antisyco"})
    llm = Scripted(replies(contradiction="ANSWER: Alexander Fleming"))
    retriever = InMemoryRetriever(POISON)
    pipeline = Pipeline(registry.build("generator", "vanilla", llm, config, retriever), retriever,
                        verifier=registry.build("verifier", "antisyco", llm, config, retriever))
    result = pipeline.run(QUESTION)
    assert result.answer.text == "Alexander Fleming"
    assert [s.stage for s in result.trace.steps] == ["retrieve", "generate"] + ["verify"] * 4
    # draft and 1 check: the short draft is its own claim, REPAIR needs no reflection and
    # answers with the check's reference answer
    assert result.trace.totals()["llm_calls"] == 2


@pytest.mark.model
@pytest.mark.slow
def test_scenarios_with_the_default_model():
    """The four hand-written scenarios with the real default model (one thread): the decisions a
    working verifier must make, and the right final answers."""
    from faithrag.eval.scenarios import load_scenarios, render_outcome, run_scenario
    from faithrag.llm import load_llm
    from faithrag.llm.models import resolve_model

    try:
        resolve_model("default")
    except ModelNotFoundError as exc:
        pytest.skip(f"default model not assembled ({exc.message}); run `make models`")
    config = Config.load(None, {"llm.model": "default", "llm.n_threads": 1, "use_cache": False})
    llm = load_llm(config.llm)
    outcomes = [run_scenario(s, llm, config) for s in load_scenarios()]
    report = "\n".join(render_outcome(o) for o in outcomes)
    for outcome in outcomes:
        assert outcome.decision in outcome.scenario.decisions, report
        assert outcome.answer_ok, report
    poisoned = [o for o in outcomes if o.scenario.poison]
    assert all(o.scenario.poison in o.draft for o in poisoned), (
        "the scenarios no longer trap the draft; make their corpora more convincing\n" + report)


@pytest.fixture
def cli_files(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/history.md").write_text(POISON[0].text)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb/fleming.md").write_text(KB[0].text)
    (tmp_path / "fake.toml").write_text('[llm]\nbackend = "fake"\n')
    (tmp_path / "set.jsonl").write_text(json.dumps({
        "id": "s::0", "question": QUESTION.text, "answer": "Alexander Fleming",
        "context": POISON[0].text}) + "\n")
    return tmp_path


def test_cli_ask_and_eval_take_verify_antisyco_with_kb(cli_files, capsys):
    """(bench shares eval's options and pipeline builder.)"""
    fake = ["--config", str(cli_files / "fake.toml"), "--verify", "antisyco"]
    assert main(["ask", QUESTION.text, "--docs", str(cli_files / "docs"), *fake]) == 2
    assert "--kb" in capsys.readouterr().err  # the hint says how to give the trusted source
    assert main(["ask", QUESTION.text, "--docs", str(cli_files / "docs"), *fake,
                 "--kb", str(cli_files / "docs")]) == 2  # the verified documents cannot be it
    assert "is the index being verified" in capsys.readouterr().err
    kb = ["--kb", str(cli_files / "kb")]
    assert main(["ask", QUESTION.text, "--docs", str(cli_files / "docs"), *fake, *kb,
                 "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["trace"]["steps"]
    assert "antisyco/decide" in [s["name"] for s in steps]
    out = cli_files / "run"
    assert main(["eval", "--file", str(cli_files / "set.jsonl"), *fake, *kb, "--out", str(out),
                 "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["verify"] == "antisyco"
    assert manifest["config"]["antisyco"]["kb"] == str(cli_files / "kb")
    record = json.loads((out / "results.jsonl").read_text())
    assert record["extra"]["decision"] == "PASS"


@pytest.mark.model
@pytest.mark.usefixtures("tiny_gguf")  # skips when the tiny model is not assembled
def test_cli_ask_verify_antisyco_with_the_tiny_model(cli_files, capsys):
    assert main(["ask", QUESTION.text, "--docs", str(cli_files / "docs"), "--verify",
                 "antisyco", "--kb", str(cli_files / "kb"), "--model", "tiny", "--threads", "1",
                 "--explain"]) == 0
    out = capsys.readouterr().out
    assert "verify/antisyco/decide" in out and "decision: " in out


@pytest.mark.parametrize("kb, contradiction, reason", [
    (KB, "ANSWER: Alexander Fleming", "no claim contradicted (max "),
    (KB, "...", "no claim scored (1 of 1 unreadable)"),
    ([Passage("k", "Bananas are yellow.", "Fruit")], "ANSWER: Alexander Fleming",
     "no claim scored (1 of 1 without a trusted passage)"),
])
def test_a_pass_says_why_no_claim_triggered_repair(kb, contradiction, reason):
    llm = Scripted(replies(answer="Alexander Fleming", contradiction=contradiction))
    stage = AntiSycophancyVerifier(llm, InMemoryRetriever(kb), judge_tokens=64)
    answer = stage.verify(QUESTION, POISON, Answer("Alexander Fleming"), Trace())
    assert answer.meta["decision"] == "PASS"
    assert answer.meta["reasons"][0].startswith(reason)


# ------------------------------------------------------------------ conflict report

def test_a_contradicted_claim_is_reported_with_the_draft_and_the_trusted_passage():
    llm = Scripted(replies(contradiction="ANSWER: Alexander Fleming"))
    _, trace = verify(llm, extract_claims="always", judgements="all")
    (conflict,) = trace.conflicts
    assert (conflict.kind, conflict.stage, conflict.action) == (
        "contradicted_by_trusted_kb", "antisyco", "repaired")
    draft, trusted = conflict.sides
    assert (draft.answer, draft.quote, draft.passages, draft.source) == (
        "Louis Pasteur", "Louis Pasteur discovered penicillin.", ["r1"], "draft")
    assert trusted.answer == "Alexander Fleming" and trusted.passages[0] == "kb1"
    assert trusted.quote.splitlines()[0] == KB[0].text
    assert conflict.confidence == 1.0
    assert [(c.kind, c.status) for c in trace.checks] == [
        ("contradicted_by_trusted_kb", "conflict"), ("low_relevance", "no_conflict")]


def test_a_repair_that_gives_the_draft_again_keeps_it():
    llm = Scripted(replies(contradiction="ANSWER: Alexander Fleming", repair="Louis Pasteur"))
    _, trace = verify(llm, repair="reanswer")
    assert [c.action for c in trace.conflicts] == ["kept"]


def test_low_relevance_is_reported_with_what_the_decision_did():
    _, trace = verify(Scripted(replies(**BAD_REFLECTION)))
    (conflict,) = trace.conflicts
    assert (conflict.kind, conflict.action, conflict.confidence) == (
        "low_relevance", "fell_back", 0.9)
    assert [(s.answer, s.passages, s.quote) for s in conflict.sides] == [
        ("", ["r1"], POISON[0].text)]


def test_unreadable_judgements_could_not_tell():
    llm = Scripted(replies(relevance="RELEVANCE: RELEVANT", contradiction="???"))
    _, trace = verify(llm)  # no readable relevance: the support is not asked
    assert trace.conflicts == []
    assert [(c.kind, c.status) for c in trace.checks] == [
        ("contradicted_by_trusted_kb", "could_not_tell"), ("low_relevance", "could_not_tell")]
    assert registry.stage("verifier", "antisyco").reports_conflicts


@pytest.mark.model
def test_the_reflection_restores_the_draft_reading_on_the_embedded_model(tiny_gguf, monkeypatch):
    """On the real (tiny) model: after the draft, the reflection evaluates only what follows the
    passages and question, and its judgements are those of a model that never drafted."""
    from faithrag.llm.llamacpp import LlamaCppLLM
    from faithrag.methods.vanilla import VanillaRAG

    passages = KB + POISON
    drafting, fresh = (LlamaCppLLM(str(tiny_gguf), n_ctx=2048, n_threads=1) for _ in range(2))
    draft = VanillaRAG(drafting).generate(QUESTION, passages, Trace())
    passages_tokens = sum(len(fresh.tokenize(p.text)) for p in passages)
    raw, evaluated = [], []
    for llm in (drafting, fresh):
        counted = []
        extend = llm._extend
        monkeypatch.setattr(llm, "_extend", lambda tokens, all_logits=False, extend=extend,
                            counted=counted: counted.append(len(tokens)) or extend(tokens,
                                                                                   all_logits))
        trace = Trace()
        AntiSycophancyVerifier(llm, InMemoryRetriever(KB), judgements="all")._reflect(
            QUESTION, passages, draft, trace, [])
        raw.append(trace.steps[0].outputs["raw"])
        evaluated.append(sum(counted))
        llm.close()
    assert raw[0] == raw[1]
    assert evaluated[0] <= evaluated[1] - passages_tokens


# ------------------------------------------------------------------ quantities

EVEREST_KB = [Passage("kb-everest", "Mount Everest stands 8,849 metres above sea level.",
                      "Everest")]
EVEREST = Question("How high is Mount Everest?")
EVEREST_POISON = [Passage("p1", "Mount Everest is 5,200 metres above sea level.", "Peaks"),
                  Passage("p2", "Everest: 5,200 metres above sea level.", "Peaks")]


def everest(contradiction, **kwargs):
    llm = Scripted(replies(answer="5,200 metres above sea level", contradiction=contradiction,
                           repair="8,849 metres above sea level", **kwargs))
    stage = AntiSycophancyVerifier(llm, InMemoryRetriever(EVEREST_KB), judge_tokens=64)
    trace = Trace()
    answer = stage.verify(EVEREST, EVEREST_POISON, Answer("5,200 metres above sea level"),
                          trace)
    return answer, trace


def test_a_poisoned_number_that_shares_its_unit_words_is_contradicted_and_repaired():
    answer, trace = everest("ANSWER: 8,849 metres above sea level")
    check = answer.meta["claims"][0]
    assert (check["verdict"], check["score"]) == ("CONTRADICTED", 1.0)
    assert answer.meta["decision"] == "REPAIR"
    assert answer.text == "8,849 metres above sea level"
    assert next((c.kind, c.status) for c in trace.checks) == (
        "contradicted_by_trusted_kb", "conflict")


def test_the_same_quantity_in_another_form_confirms_the_draft():
    llm = Scripted(replies(answer="8,849 m", contradiction="ANSWER: 8849 metres"))
    stage = AntiSycophancyVerifier(llm, InMemoryRetriever(EVEREST_KB), judge_tokens=64)
    answer = stage.verify(EVEREST, [EVEREST_KB[0]], Answer("8,849 m"), Trace())
    assert answer.meta["claims"][0]["verdict"] == "CONSISTENT"
    assert answer.meta["decision"] == "PASS" and "confirmed" in answer.meta["reasons"][0]


def test_a_reference_that_cannot_be_compared_confirms_nothing_and_is_reported_as_such():
    # "several thousand metres" is no value: neither a contradiction nor a confirmation
    kb = [Passage("kb-vague", "Mount Everest rises several thousand metres above the sea.",
                  "Everest")]
    llm = Scripted(replies(answer="5,200 metres", contradiction="ANSWER: several thousand metres"))
    stage = AntiSycophancyVerifier(llm, InMemoryRetriever(kb), judge_tokens=64)
    trace = Trace()
    answer = stage.verify(EVEREST, EVEREST_POISON, Answer("5,200 metres"), trace)
    check = answer.meta["claims"][0]
    assert (check["verdict"], check["score"]) == ("CANNOT_TELL", None)
    assert answer.meta["decision"] == "PASS" and answer.meta["unparsable"] == 0
    assert "confirmed" not in answer.meta["reasons"][0]
    assert "cannot tell" in answer.meta["reasons"][0]
    assert "relevance" in llm.batches[-1]  # not confirmed: the reflection is asked
    assert ("contradicted_by_trusted_kb", "could_not_tell") in [
        (c.kind, c.status) for c in trace.checks]


def test_a_reference_cut_at_its_budget_loses_its_last_word():
    class Cut(Scripted):
        def generate(self, requests):
            completions = super().generate(requests)
            return [replace(c, finish_reason="length") if r.purpose == "contradiction" else c
                    for r, c in zip(requests, completions)]
    draft = "It has 8,849 metres and 1958 steps"
    kb = [Passage("kb-steps", "It has 8,849 metres and 1958 steps.", "Everest")]
    llm = Cut(replies(answer=draft, contradiction="ANSWER: It has 8,849 metres and 195"))
    stage = AntiSycophancyVerifier(llm, InMemoryRetriever(kb), judge_tokens=64)
    answer = stage.verify(EVEREST, kb, Answer(draft), Trace())
    check = answer.meta["claims"][0]
    assert check["reference"] == "It has 8,849 metres and"
    assert check["verdict"] == "CONSISTENT" and answer.meta["decision"] == "PASS"

import pytest
from cfrag_doubles import PASSAGES, QUESTION, KeywordEmbedder, draft_by_evidence

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.llm.fake import FakeLLM
from faithrag.methods.cfrag import CFRAG
from faithrag.methods.cfrag.cfrag import Hypothesis
from faithrag.methods.cfrag.parsing import ParsedHypothesis
from faithrag.pipeline import Pipeline
from faithrag.retrieval import InMemoryRetriever
from faithrag.retrieval.scorers import LLMJudgeScorer
from faithrag.retrieval.searcher import index_text
from faithrag.types import Question, Trace

# The fake tokenizer counts bytes, so the token budgets are raised for the scripted replies.
# The scripted drafts write their rationale; the extracted one has its own tests at the end.
BASE = {"cfrag.scorer": "bi_encoder", "cfrag.rationale": "generated",
        "cfrag.counterfactual_tokens": 400, "cfrag.draft_tokens": 400, "cfrag.k_clusters": 2,
        "cfrag.subset_size": 2}


def make(responder=draft_by_evidence, retriever=None, scorer=None, **overrides):
    config = Config.load(None, {**BASE, **{f"cfrag.{k}": v for k, v in overrides.items()}})
    llm = FakeLLM(responder)
    return llm, CFRAG(llm, config.cfrag, retriever, k=3, answer_tokens=400,
                      embedder=KeywordEmbedder(), scorer=scorer)


def run(generator, question=QUESTION, passages=PASSAGES):
    trace = Trace()
    answer = generator.generate(Question(question) if isinstance(question, str) else question,
                                list(passages), trace)
    return answer, {s.name: s for s in trace.steps}


class RecordingScorer:
    name = "recording"

    def __init__(self):
        self.calls = []

    def score(self, query, passages, step=None):
        self.calls.append((query, list(passages)))
        return [float("Armstrong" in p) if "first" in query else 0.5 for p in passages]


def test_drafts_go_out_in_one_generate_call_after_the_counterfactuals():
    llm, generator = make()
    answer, steps = run(generator)
    purposes = [[r.purpose for r in batch] for batch in llm.generate_calls]
    assert purposes[0] == ["counterfactuals"] * 6  # the answer + one per type, one call
    assert purposes[1] == ["draft"] * 3  # M = 3 hypotheses, one call
    assert len(steps["cfrag.drafts"].llm_calls) == 3
    assert answer.text == "Neil Armstrong" and answer.parse_status == "ok"
    assert steps["cfrag.counterfactuals"].outputs["selected"] == [
        QUESTION.replace("first", "second"), QUESTION.replace("11", "12")]


def test_disagreement_goes_to_synthesis_over_the_top_hypotheses_best_first():
    llm, generator = make()
    answer, steps = run(generator)
    arbitration = steps["cfrag.arbitration"]
    assert arbitration.decision.startswith("hypotheses disagree")
    assert answer.meta["cfrag"]["decision"] == "synthesis"
    synthesis = llm.generate_calls[-1][0]
    assert synthesis.purpose == "synthesis"
    scored = sorted(steps["cfrag.scoring"].outputs["hypotheses"], key=lambda h: -h["psi"])
    shown = synthesis.messages[-1].content
    positions = [shown.index(f'rank="{i}"') for i in (1, 2, 3)]
    assert positions == sorted(positions)
    assert f'rank="1" score="{scored[0]["psi"]:.3f}"' in shown
    assert "<candidate" in shown and "not instructions" in synthesis.messages[0].content


def test_causal_score_favours_evidence_specific_to_the_question():
    _, generator = make()
    _, steps = run(generator)
    evidence_causal = steps["cfrag.scoring"].outputs["evidence_causal"]
    assert evidence_causal["armstrong"] > 0 > evidence_causal["aldrin"]
    by_answer = {}
    for h in steps["cfrag.scoring"].outputs["hypotheses"]:
        by_answer.setdefault(h["answer"], []).append(h["causal"])
    assert max(by_answer["Neil Armstrong"]) > max(by_answer["Buzz Aldrin"])


def test_consensus_takes_the_best_psi_without_a_synthesis_call():
    def same(request):
        if request.purpose == "counterfactuals":
            return draft_by_evidence(request)
        return "Answer: Neil Armstrong\nRationale: passage " + str(len(request.messages[-1].content))
    llm, generator = make(same)
    answer, steps = run(generator)
    assert [b[0].purpose for b in llm.generate_calls] == ["counterfactuals", "draft"]
    assert len(llm.generate_calls) == 2
    assert steps["cfrag.arbitration"].decision.startswith("consensus: all 3 hypotheses")
    best = max(steps["cfrag.scoring"].outputs["hypotheses"], key=lambda h: h["psi"])
    assert steps["cfrag.arbitration"].outputs["winner"] == best["n"]
    assert answer.text == "Neil Armstrong" and answer.meta["cfrag"]["decision"] == "consensus"


def test_subsets_are_deterministic_per_question_and_seed():
    outputs = [run(make()[1])[1]["cfrag.sampling"].outputs["subsets"] for _ in range(2)]
    assert outputs[0] == outputs[1]
    other_question = QUESTION.replace("Who was", "Who exactly was")
    seeds = [run(make()[1], q)[1]["cfrag.sampling"].inputs["seed"] for q in (QUESTION,
                                                                            other_question)]
    assert seeds[0] != seeds[1]


def test_ablation_without_counterfactuals():
    scorer = RecordingScorer()
    llm, generator = make(scorer=scorer, counterfactuals=False)
    _, steps = run(generator)
    assert "cfrag.counterfactuals" not in steps
    assert all(r.purpose != "counterfactuals" for b in llm.generate_calls for r in b)
    assert scorer.calls == [] and "no counterfactuals" in steps["cfrag.scoring"].decision
    assert all(h["causal"] is None for h in steps["cfrag.scoring"].outputs["hypotheses"])


def test_ablation_without_evidence_division_drafts_once_over_the_pool():
    llm, generator = make(evidence_division=False)
    _, steps = run(generator)
    assert "cfrag.clustering" not in steps
    [draft] = [r for b in llm.generate_calls for r in b if r.purpose == "draft"]
    pool = steps["cfrag.dialectical_retrieval"].outputs["pool"]
    assert draft.messages[-1].content.count("<passage") == len(pool)
    assert steps["cfrag.arbitration"].decision.startswith("consensus: all 1 hypotheses")


def test_ablation_without_causal_scoring_uses_coherence_only():
    scorer = RecordingScorer()
    _, generator = make(scorer=scorer, causal_scoring=False)
    _, steps = run(generator)
    assert scorer.calls == [] and "causal scoring off" in steps["cfrag.scoring"].decision
    for h in steps["cfrag.scoring"].outputs["hypotheses"]:
        assert h["psi"] == h["coherence"] and h["causal"] is None


def test_scorer_sees_every_query_and_only_the_drafted_evidence():
    scorer = RecordingScorer()
    _, generator = make(scorer=scorer)
    _, steps = run(generator)
    queries = [q for q, _ in scorer.calls]
    assert queries[0] == QUESTION and len(queries) == 3  # the question + 2 counterfactuals
    drafted = {pid for h in steps["cfrag.drafts"].outputs["hypotheses"] for pid in h["evidence"]}
    assert all(len(texts) == len(drafted) for _, texts in scorer.calls)


def test_llm_judge_scorer_is_the_default_and_its_calls_are_recorded():
    config = Config.load(None, {k: v for k, v in BASE.items() if k != "cfrag.scorer"})
    assert config.cfrag.scorer == "llm_judge"
    llm = FakeLLM(draft_by_evidence)
    generator = CFRAG(llm, config.cfrag, k=3, embedder=KeywordEmbedder())
    _, steps = run(generator)
    judged = [c for c in steps["cfrag.scoring"].llm_calls if c.purpose == "relevance_judge"]
    drafted = {pid for h in steps["cfrag.drafts"].outputs["hypotheses"] for pid in h["evidence"]}
    assert len(judged) == 3 * len(drafted)
    assert isinstance(generator._relevance_scorer(None), LLMJudgeScorer)


def test_unparsable_drafts_are_counted_and_never_guessed():
    def garbage(request):
        if request.purpose == "counterfactuals":
            return draft_by_evidence(request)
        return "Neil Armstrong probably"
    _, generator = make(garbage)
    answer, steps = run(generator)
    assert answer.parse_status == "failed"
    assert answer.meta["cfrag"] == {"decision": "unparsable", "unparsable_drafts": 3}
    assert steps["cfrag.drafts"].outputs["unparsable"] == [1, 2, 3]
    assert len(steps["cfrag.drafts"].warnings) == 3


def test_one_unparsable_draft_is_left_out_and_abstentions_do_not_win():
    replies = iter(["garbage", "Answer: unknown\nRationale: not stated",
                    "Answer: Buzz Aldrin\nRationale: photos"])

    def responder(request):
        if request.purpose == "counterfactuals":
            return draft_by_evidence(request)
        return next(replies)
    _, generator = make(responder)
    answer, steps = run(generator)
    assert steps["cfrag.drafts"].outputs["unparsable"] == [1]
    assert answer.text == "Buzz Aldrin"  # the abstention is not a competing answer: consensus
    assert answer.meta["cfrag"]["unparsable_drafts"] == 1


def test_multiple_choice_maps_options_and_an_unparsable_synthesis_falls_back():
    def responder(request):
        if request.purpose == "counterfactuals":
            return draft_by_evidence(request)
        if request.purpose == "synthesis":
            return "Both seem plausible."
        return draft_by_evidence(request).replace("Neil Armstrong", "B")  # a letter
    _, generator = make(responder)
    question = Question(QUESTION, choices=["Buzz Aldrin", "Neil Armstrong"])
    answer, steps = run(generator, question)
    assert answer.meta["cfrag"]["synthesis_unparsable"] is True
    best = max(steps["cfrag.scoring"].outputs["hypotheses"], key=lambda h: h["psi"])
    assert answer.choice_index == (1 if best["answer"] == "B" else 0)
    assert answer.text == question.choices[answer.choice_index]
    assert any("unparsable" in w for w in steps["cfrag.arbitration"].warnings)


def test_a_given_retriever_serves_the_counterfactuals_and_the_pipeline_passages_the_question():
    class Counting(InMemoryRetriever):
        def __init__(self, passages):
            super().__init__(passages)
            self.queries = []

        def retrieve(self, query, k):
            self.queries.append(query)
            return super().retrieve(query, k)
    retriever = Counting(PASSAGES)
    _, generator = make(retriever=retriever)
    result = Pipeline(generator, retriever, k=3).run(QUESTION)
    assert retriever.queries[0] == QUESTION  # the pipeline's own retrieval
    assert QUESTION not in retriever.queries[1:] and len(retriever.queries) == 3
    assert result.answer.text == "Neil Armstrong"


def test_factory_builds_cfrag_from_the_config():
    config = Config.load(None, {"cfrag.m_subsets": 5, "retrieval.k": 7})
    generator = registry.build("generator", "cfrag", FakeLLM(), config, None)
    assert isinstance(generator, CFRAG) and generator.settings.m_subsets == 5
    assert generator.k == 7 and generator.name == "cfrag"
    with pytest.raises(ConfigError):
        Config.load(None, {"cfrag.scorer": "cross_encoder"})


def short_answer_by_evidence(request):
    """The scripted model asked for a short answer only: the answer line of draft_by_evidence."""
    reply = draft_by_evidence(request)
    return reply.split("Answer: ")[-1] if request.purpose == "draft" else reply


def test_extracted_rationale_drafts_with_vanillas_prompt_and_quotes_the_subset():
    llm, generator = make(short_answer_by_evidence, rationale="extracted")
    answer, steps = run(generator)
    drafts = [r for batch in llm.generate_calls for r in batch if r.purpose == "draft"]
    assert len(drafts) == 3
    assert all(r.messages[-1].content.endswith("Answer with a short phrase only, no explanation.")
               for r in drafts)
    assert answer.text == "Neil Armstrong" and answer.parse_status == "ok"
    pool = {p.id: p.text for p in PASSAGES}
    for h in steps["cfrag.drafts"].outputs["hypotheses"]:
        subset = [pool[i] for i in h["evidence"]]
        assert any(h["rationale"] in text for text in subset)  # a sentence of its own evidence


def test_extracted_rationale_an_empty_draft_is_unparsable():
    def silent(request):
        return "" if request.purpose == "draft" else draft_by_evidence(request)
    _, generator = make(silent, rationale="extracted")
    answer, steps = run(generator)
    assert answer.parse_status == "failed"
    assert steps["cfrag.drafts"].outputs["unparsable"] == [1, 2, 3]


def test_the_answer_records_each_hypothesis_evidence():
    _, generator = make()
    answer, steps = run(generator)
    drafted = [h["evidence"] for h in steps["cfrag.drafts"].outputs["hypotheses"]]
    assert [h["evidence"] for h in answer.meta["cfrag"]["hypotheses"]] == drafted


def test_an_anchored_division_gives_every_draft_the_passage_most_relevant_to_the_question():
    _, generator = make(anchor_top=True)
    _, steps = run(generator)
    pool = [pid for pid, _, _ in steps["cfrag.dialectical_retrieval"].outputs["pool"]]
    by_id = {p.id: p for p in PASSAGES}
    embedder = KeywordEmbedder()
    question = embedder.embed([QUESTION])[0]
    to_question = {pid: float(embedder.embed([index_text(by_id[pid])])[0] @ question)
                   for pid in pool}
    best = max(to_question, key=to_question.get)
    assert best != pool[0]  # the pool's first is most relevant to a counterfactual
    assert steps["cfrag.sampling"].outputs["anchor"] == best
    subsets = [h["evidence"] for h in steps["cfrag.drafts"].outputs["hypotheses"]]
    assert len(subsets) > 1 and all(best in subset for subset in subsets)
    _, plain = make()
    _, steps = run(plain)
    assert not all(best in h["evidence"] for h in steps["cfrag.drafts"].outputs["hypotheses"])


def test_drafts_agree_only_when_every_pair_agrees_whatever_their_order():
    def hypothesis(number, answer):
        return Hypothesis(number, [], "", ParsedHypothesis(answer, ""), None, False, None)

    question = Question("When did the launch happen?")
    answers = ["1969", "July 1969", "June 1969"]  # "1969" matches both, they do not match
    for order in (answers, answers[::-1]):
        groups = CFRAG._groups(question, [hypothesis(i, a) for i, a in enumerate(order, 1)])
        assert len(groups) == 2, order


# ------------------------------------------------------------------ conflict report

def test_disagreeing_drafts_are_a_passage_conflict_with_their_evidence_as_sides():
    _, generator = make()
    _, steps = run(generator)
    arbitration = steps["cfrag.arbitration"]
    (conflict,) = arbitration.conflicts
    assert (conflict.kind, conflict.stage, conflict.action) == ("passage_vs_passage", "cfrag",
                                                                "kept")
    hypotheses = steps["cfrag.scoring"].outputs["hypotheses"]
    answers = {h["answer"] for h in hypotheses}
    assert {s.answer for s in conflict.sides} == answers and len(answers) > 1
    drafts = steps["cfrag.drafts"].outputs["hypotheses"]
    for side in conflict.sides:
        evidence = {e for d in drafts if d["answer"] == side.answer for e in d["evidence"]}
        assert set(side.passages) == evidence
        assert len(side.quote.splitlines()) == len(side.passages)
    largest = max(sum(h["answer"] == a for h in hypotheses) for a in answers)
    assert conflict.confidence == pytest.approx(1 - largest / len(hypotheses))
    assert [(c.kind, c.status) for c in arbitration.checks] == [("passage_vs_passage", "conflict")]


def test_a_consensus_is_no_conflict():
    def same(request):
        if request.purpose == "counterfactuals":
            return draft_by_evidence(request)
        return "Answer: Neil Armstrong\nRationale: passage " + str(len(request.messages[-1].content))
    _, generator = make(same)
    _, steps = run(generator)
    arbitration = steps["cfrag.arbitration"]
    assert arbitration.conflicts == []
    assert [(c.kind, c.status) for c in arbitration.checks] == [
        ("passage_vs_passage", "no_conflict")]
    assert registry.stage("generator", "cfrag").reports_conflicts


def test_the_generator_view_is_the_drafted_evidence_and_says_it_was_sampled():
    _, generator = make()
    result = Pipeline(generator).run(QUESTION, passages=list(PASSAGES))
    steps = {s.name: s for s in result.trace.steps}
    drafted = {pid for h in steps["cfrag.drafts"].outputs["hypotheses"] for pid in h["evidence"]}
    view = result.evidence
    assert {p.id for p in view.seen} == drafted & {p.id for p in PASSAGES}
    assert view.dropped and view.reason == (
        "the method drafts its answers from evidence subsets it samples")

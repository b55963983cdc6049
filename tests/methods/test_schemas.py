"""The structures the stages ask for: each stage's requests carry one (FakeLLM records them), each
is bounded, and on llama.cpp's grammar engine (the tiny model's vocabulary) each admits a reply in
the format its prompt asks for, which the stage's reader reads, and refuses one outside it."""

from __future__ import annotations

import json

import pytest

from faithrag.llm.fake import FakeLLM
from faithrag.methods import schemas
from faithrag.methods.antisyco import (
    RELEVANCE_LABELS,
    SUPPORT_LABELS,
    VERDICT_LABELS,
    AntiSycophancyVerifier,
)
from faithrag.methods.cfrag.counterfactuals import counterfactual_requests
from faithrag.methods.cfrag.drafting import draft_request, synthesis_request
from faithrag.methods.cfrag.parsing import parse_counterfactuals, parse_hypothesis
from faithrag.methods.cot_json import answer_json
from faithrag.methods.crossval import CrossValidatedReranker
from faithrag.methods.json_answer import parse_json_answer
from faithrag.methods.judgements import (
    parse_claims,
    parse_label,
    parse_reference_answer,
    parse_score,
)
from faithrag.methods.listwise import ListwiseRanker
from faithrag.methods.rank_parsing import parse_pair, parse_permutation, parse_verdict
from faithrag.retrieval import InMemoryRetriever
from faithrag.types import Answer, Passage, Question, Step, Trace

OPTIONS = ["Alexander Fleming", "Louis Pasteur"]
MC = Question("Who discovered penicillin?", choices=OPTIONS)
OPEN = Question("Who discovered penicillin?")
PASSAGES = [Passage(f"p{i}", f"Passage {i} about penicillin.", f"T{i}") for i in range(1, 5)]


def step() -> Step:
    return Step("test", "test")


# ----------------------------------------------------------------- bounds
def test_free_text_gets_three_characters_per_token_left_and_never_more_than_its_limit():
    assert schemas.free_chars(100, 50, 480) == 250
    assert schemas.free_chars(1000, 50, 480) == 480
    assert schemas.free_chars(10, 500, 480) == 1


def test_the_json_answer_schema_bounds_the_reason_and_lists_only_the_options():
    schema = schemas.choice_answer_schema(OPTIONS + ["Louis Pasteur"], max_tokens=64)
    assert list(schema["properties"]) == ["Reason", "Answer"]  # reason first, as the paper
    assert schema["properties"]["Answer"] == {"enum": OPTIONS}
    assert schema["properties"]["Reason"]["maxLength"] == 3 * 64 - len(
        '{"Reason": "", "Answer": }') - len('"Alexander Fleming"')
    assert schema["required"] == ["Reason", "Answer"] and not schema["additionalProperties"]
    with pytest.raises(ValueError):
        schemas.choice_answer_schema([], max_tokens=64)


def test_id_grammars_name_only_the_ids_shown_and_a_permutation_at_most_n_of_them():
    assert '"[3]"' in schemas.permutation_grammar(3) and '"[4]"' not in schemas.permutation_grammar(3)
    assert "{0,2}" in schemas.permutation_grammar(3)
    assert schemas.permutation_grammar(1) == 'root ::= id\nid ::= "[1]"\n'
    with pytest.raises(ValueError):
        schemas.conflict_pair_grammar(0)


# ----------------------------------------------------------------- every stage asks with one
def test_cot_json_and_csrag_answers_carry_the_choice_schema():
    llm = FakeLLM(default='{"Reason": "r", "Answer": "Louis Pasteur"}')
    answer = answer_json(llm, MC, PASSAGES, step(), max_tokens=64)
    assert answer.text == "Louis Pasteur"
    assert llm.calls[0].schema == schemas.choice_answer_schema(OPTIONS, 64)


def test_listwise_ranking_asks_for_a_permutation_of_the_ids_shown():
    request = ListwiseRanker(FakeLLM()).window_request(OPEN, PASSAGES, step())
    assert request.grammar == schemas.permutation_grammar(len(PASSAGES))


def test_crossval_asks_for_its_pair_its_verdicts_and_side_answers_with_grammars():
    def reply(request):
        return {"detect_conflict": "Conflict: [1] [2]", "rank": "[1] > [2] > [3] > [4]",
                "cross_validate": "Reason: r\nFalse passage: B"}[request.purpose]
    llm = FakeLLM(reply)
    reranker = CrossValidatedReranker(llm, ListwiseRanker(llm), max_rounds=1)
    reranker.rerank(OPEN, PASSAGES, Trace())
    grammar = {r.purpose: r.grammar for r in llm.calls}
    assert grammar["detect_conflict"] == schemas.conflict_pair_grammar(len(PASSAGES))
    assert grammar["cross_validate"] == schemas.verdict_grammar(reranker.reason_tokens, ("A", "B"))
    side = reranker._side_request(OPEN, PASSAGES[0], step())
    assert side.grammar == schemas.labelled_answer_grammar(reranker.answer_tokens)


def test_the_verifier_asks_for_labels_scores_claims_and_checks_with_grammars():
    replies = {"relevance": "RELEVANCE: RELEVANT\nSCORE: 0.9", "support": "SUPPORT: SUPPORTED",
               "claims": "- Louis Pasteur discovered penicillin.",
               "contradiction": "ANSWER: Alexander Fleming", "repair": "Alexander Fleming"}
    llm = FakeLLM(lambda request: replies[request.purpose])
    kb = InMemoryRetriever([Passage("kb", "Penicillin was discovered by Alexander Fleming.")])
    stage = AntiSycophancyVerifier(llm, kb, judge_tokens=64, extract_claims="always",
                                   judgements="all", repair="reanswer")
    stage.verify(OPEN, PASSAGES[:1], Answer("Louis Pasteur"), Trace())
    grammar = {r.purpose: r.grammar for r in llm.calls}
    assert grammar["relevance"] == schemas.label_grammar("RELEVANCE", RELEVANCE_LABELS, True)
    assert grammar["support"] == schemas.label_grammar("SUPPORT", SUPPORT_LABELS)
    assert grammar["claims"] == schemas.claims_grammar(stage.max_claims, stage.claim_tokens)
    assert grammar["contradiction"] == schemas.labelled_answer_grammar(64)
    assert grammar["repair"] is None  # free-form answers carry no structure


def test_cfrag_counterfactuals_drafts_and_synthesis_carry_grammars():
    original, *variants = counterfactual_requests("Who directed Jaws?", 48)
    assert original.grammar == schemas.short_answer_grammar(48)
    assert {v.grammar for v in variants} == {schemas.counterfactual_grammar(48)}
    llm = FakeLLM()
    draft = draft_request(llm, MC, PASSAGES, 128, True, step(), write_rationale=True)
    assert draft.grammar == schemas.draft_grammar(128, OPTIONS)
    plain = draft_request(llm, MC, PASSAGES, 128, True, step(), write_rationale=False)
    assert plain.grammar is None
    final = synthesis_request(llm, OPEN, PASSAGES, [("Fleming", "r", 0.9)], 48, step())
    assert final.grammar == schemas.short_answer_grammar(48)


# ----------------------------------------------------------------- on llama.cpp's engine
@pytest.fixture(scope="module")
def llm(tiny_gguf):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make setup)")
    from faithrag.llm.llamacpp import LlamaCppLLM
    model = LlamaCppLLM("tiny", n_ctx=512, n_threads=1)
    yield model
    model.close()


def admits(llm, gbnf: str, text: str) -> bool:
    """Whether llama.cpp's grammar takes `text` (as the tiny model tokenizes it) and may end."""
    mask = llm._grammars.mask(gbnf)
    try:
        for token in llm.tokenize(text):
            if not mask.allows(token):
                return False
            mask.accept(token)
        return mask.allows(llm._lib.llama_vocab_eos(llm._vocab))
    finally:
        mask.close()


def _json(schema) -> str:
    from faithrag.llm.grammar import gbnf_for
    return gbnf_for(schema, None)


CASES = [  # (structure, a reply in the prompt's format, what the reader reads, a reply outside)
    (lambda: _json(schemas.choice_answer_schema(OPTIONS, 64)),
     '{"Reason": "Passage 1 says so.", "Answer": "Alexander Fleming"}',
     lambda t: parse_json_answer(t, OPTIONS).choice_index == 0,
     '{"Reason": "It says so.", "Answer": "Robert Koch"}'),
    (lambda: schemas.conflict_pair_grammar(4), "Conflict: [2] [4]",
     lambda t: parse_pair(t, 4).pair == (1, 3), "Conflict: [2] [5]"),
    (lambda: schemas.permutation_grammar(4), "[3] > [1] > [4] > [2]",
     lambda t: parse_permutation(t, 4).order == [2, 0, 3, 1], "[3] > [1] > [4] > [2] > [1]"),
    (lambda: schemas.verdict_grammar(160), "Reason: B gives another year.\nFalse passage: B",
     lambda t: parse_verdict(t).false_label == "B", "False passage: B"),
    (lambda: schemas.label_grammar("RELEVANCE", RELEVANCE_LABELS, True),
     "RELEVANCE: SUSPICIOUS\nSCORE: 0.35",
     lambda t: parse_label(t, RELEVANCE_LABELS, "relevance") == "SUSPICIOUS"
     and parse_score(t) == 0.35, "RELEVANCE: SUSPICIOUS\nSCORE: 1.5"),
    (lambda: schemas.label_grammar("VERDICT", VERDICT_LABELS, True),
     "VERDICT: CONTRADICTED\nSCORE: 1",
     lambda t: parse_label(t, VERDICT_LABELS, "verdict") == "CONTRADICTED", "VERDICT: FALSE"),
    (lambda: schemas.claims_grammar(2, 96), "- Fleming found penicillin.\n- It was in 1928.",
     lambda t: len(parse_claims(t, 2).claims) == 2, "- One claim.\n- Two claims.\n- Three."),
    (lambda: schemas.labelled_answer_grammar(24), "ANSWER: Alexander Fleming",
     lambda t: parse_reference_answer(t).text == "Alexander Fleming", "The answer is Fleming"),
    (lambda: schemas.draft_grammar(128, OPTIONS),
     "Rationale: Passage 2 says so.\nAnswer: Louis Pasteur",
     lambda t: parse_hypothesis(t).answer == "Louis Pasteur",
     "Rationale: Passage 2.\nAnswer: Pasteur"),
    (lambda: schemas.counterfactual_grammar(48), "Who directed Jaws 2? => Jeannot Szwarc",
     lambda t: parse_counterfactuals(f"role: {t}").candidates[0].answer == "Jeannot Szwarc",
     "Who directed Jaws 2?\n=> Jeannot Szwarc"),
]


@pytest.mark.model
@pytest.mark.parametrize("structure, reply, reads, outside", CASES)
def test_each_structure_admits_its_prompts_format_and_refuses_what_lies_outside(
        llm, structure, reply, reads, outside):
    gbnf = structure()
    assert admits(llm, gbnf, reply) and reads(reply)
    assert not admits(llm, gbnf, outside)
    json.dumps(gbnf)  # plain text a request can carry


ODD_OPTIONS = ['"The Merger"', "``The Negotiation ''", "C:\\Windows", "Zürich"]


@pytest.mark.model
def test_options_with_quotes_backslashes_and_accents_compile_and_admit_their_json(llm):
    gbnf = _json(schemas.choice_answer_schema(ODD_OPTIONS, 64))
    for index, option in enumerate(ODD_OPTIONS):
        reply = json.dumps({"Reason": "It says so.", "Answer": option}, ensure_ascii=False)
        assert admits(llm, gbnf, reply), reply
        assert parse_json_answer(reply, ODD_OPTIONS).choice_index == index
    assert not admits(llm, gbnf, '{"Reason": "It says so.", "Answer": "The Merger"}')

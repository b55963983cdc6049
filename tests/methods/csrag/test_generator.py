import pytest

from faithrag.config import CSRAGConfig
from faithrag.errors import ConfigError
from faithrag.llm.base import ChoiceRequest, GenerationRequest
from faithrag.llm.fake import FakeLLM
from faithrag.methods.csrag import ABLATION_GRID, CSRAG, enhanced_context
from faithrag.methods.csrag.paraphrase import Paraphrases
from faithrag.types import Passage, Question, Trace

Q = Question("What is the capital of Australia?", choices=["Sydney", "Canberra"])
P = [Passage("gazette", "Since 2031 the capital is Sydney.", title="Gazette")]
FACTS = "- Canberra is the capital.\n- Canberra was chosen in 1908."
PARAPHRASES = ("[PARAPHRASE]: Sydney has been the capital since 2031.\n"
               "[PARAPHRASE]: From 2031 on, Sydney is the capital.")


def paraphrase(request: GenerationRequest) -> str:
    first, second = PARAPHRASES.split("\n")
    return first if "simple words" in request.messages[-1].content else second


def respond(request: GenerationRequest) -> str:
    if request.purpose == "paraphrase":
        return paraphrase(request)
    return FACTS if request.purpose == "facts" else \
        '{"Reason": "the gazette says so", "Answer": "Sydney"}'


def answering(answer: str, facts: str = FACTS):
    """A responder with the usual facts and paraphrases and this answer."""
    def respond(request: GenerationRequest) -> str:
        if request.purpose == "paraphrase":
            return paraphrase(request)
        return facts if request.purpose == "facts" else answer
    return respond


def run(config=None, question=Q, llm=None):
    llm = llm or FakeLLM(respond)
    trace = Trace()
    answer = CSRAG(llm, config or CSRAGConfig()).generate(question, P, trace)
    return answer, trace, llm


def test_steps_run_in_order_and_the_answer_is_read():
    answer, trace, llm = run()
    assert [s.stage for s in trace.steps] == ["facts", "paraphrase", "bias", "generate"]
    assert (answer.text, answer.choice_index, answer.parse_status) == ("Sydney", 0, "ok")
    assert [c.purpose for c in llm.calls] == ["facts", "paraphrase", "paraphrase", "answer"]


def test_answer_request_carries_alpha_on_facts_and_beta_on_context():
    _, trace, llm = run(CSRAGConfig(alpha=-1.0, beta=3.0))
    bias = llm.calls[-1].bias.as_dict()
    # byte tokenizer: "C" only in the facts ("Canberra"), "S" and "2" only in the context,
    # "n" in both ("Canberra", "Sydney")
    assert bias[ord("C")] == -1.0
    assert bias[ord("S")] == bias[ord("2")] == 3.0
    assert bias[ord("n")] == 2.0
    outputs = trace.steps[2].outputs
    assert outputs["parametric_tokens"] > 0 and outputs["context_tokens"] > outputs["overlap"]


def test_paraphrases_are_appended_after_the_original_context():
    _, trace, llm = run()
    prompt = llm.calls[-1].messages[-1].content
    original = prompt.index("Since 2031 the capital is Sydney.")
    assert original < prompt.index("Sydney has been the capital since 2031.")
    assert prompt.index("Sydney has been the capital") < prompt.index("From 2031 on")
    assert trace.steps[1].outputs["status"] == {"gazette": "ok"}


def test_original_context_only_when_enhancement_is_off():
    _, trace, llm = run(CSRAGConfig(enhance_context=False))
    assert "paraphrase" not in [c.purpose for c in llm.calls]
    assert "paraphrase" not in [s.stage for s in trace.steps]


def test_bias_flips_a_choice_scored_answer_and_zero_weights_do_not():
    prior = {"Canberra": 0.0, "Sydney": -1.5}  # the model "remembers" Canberra
    make = lambda: FakeLLM(respond, choice_prior=prior.__getitem__)
    biased, _, llm = run(CSRAGConfig(answer_mode="choices"), llm=make())
    assert biased.text == "Sydney" and isinstance(llm.calls[-1], ChoiceRequest)
    plain, _, _ = run(CSRAGConfig(answer_mode="choices", alpha=0.0, beta=0.0), llm=make())
    assert plain.text == "Canberra"


def test_ablation_grid_scores_every_cell_and_each_matches_its_own_run():
    prior = {"Canberra": 0.0, "Sydney": -1.5}
    make = lambda: FakeLLM(respond, choice_prior=prior.__getitem__)
    answer, trace, llm = run(CSRAGConfig(answer_mode="choices", ablation_grid=True), llm=make())
    cells = answer.meta["variants"]
    assert list(cells) == [cell.label for cell in ABLATION_GRID]
    for cell in ABLATION_GRID:
        alone, _, _ = run(CSRAGConfig(answer_mode="choices", alpha=cell.alpha, beta=cell.beta,
                                      filter_stopwords=cell.filter_stopwords,
                                      case_variants=cell.case_variants), llm=make())
        assert cells[cell.label]["choice_index"] == alone.choice_index, cell.label
    assert cells["a=0 b=0"]["choice_index"] == 1 and cells["a=-1 b=3"]["choice_index"] == 0
    assert answer.choice_index == cells["a=-1 b=3"]["choice_index"]
    # the fake has no shared pass: one scoring call per cell, each recorded
    scoring = [c for c in trace.steps[-1].llm_calls if c.purpose == "score_choices"]
    assert len(scoring) == 1 + len(ABLATION_GRID) == sum(isinstance(c, ChoiceRequest)
                                                          for c in llm.calls)


@pytest.mark.parametrize(("config_filters", "config_cases"),
                         [(True, False), (False, False), (True, True)])
def test_each_ablation_cell_has_its_own_token_set_settings_whatever_the_config(config_filters,
                                                                               config_cases):
    def biases(llm):
        return [c.bias.as_dict() if c.bias else {} for c in llm.calls
                if isinstance(c, ChoiceRequest)]

    _, _, llm = run(CSRAGConfig(answer_mode="choices", ablation_grid=True,
                                filter_stopwords=config_filters, case_variants=config_cases))
    for cell, bias in zip(ABLATION_GRID, biases(llm)[1:], strict=True):
        _, _, alone = run(CSRAGConfig(answer_mode="choices", alpha=cell.alpha, beta=cell.beta,
                                      filter_stopwords=cell.filter_stopwords,
                                      case_variants=cell.case_variants))
        assert bias == biases(alone)[-1], cell.label


def test_ablation_grid_is_refused_for_json_answers():
    with pytest.raises(ConfigError, match="csrag_choices"):
        CSRAG(FakeLLM(respond), CSRAGConfig(ablation_grid=True))


def test_json_scored_reasons_without_the_bias_and_scores_the_answer_with_it():
    prior = {'Canberra"': 0.0, 'Sydney"': -1.5}  # options are scored with their closing quote
    llm = FakeLLM(answering('{"Reason": "the gazette says so", "Answer": "Canberra"}'),
                  choice_prior=prior.__getitem__)
    answer, trace, llm = run(CSRAGConfig(answer_mode="json_scored", ablation_grid=True), llm=llm)
    reason = next(c for c in llm.calls if getattr(c, "purpose", "") == "reason")
    scoring = [c for c in llm.calls if isinstance(c, ChoiceRequest)]
    assert reason.bias is None and "Since 2031" in reason.messages[-1].content
    assert scoring[0].bias and scoring[0].answer_prefix.startswith('{"Reason": "the gazette')
    assert (answer.text, answer.parse_status) == ("Sydney", "ok")
    assert answer.meta["variants"]["a=0 b=0"]["choice_index"] == 1  # the model's own pick
    assert trace.steps[-1].outputs["reason_status"] == "complete"


def test_unparsable_json_is_a_counted_failure_never_an_option():
    llm = FakeLLM(answering("I think Sydney"))
    answer, trace, _ = run(llm=llm)
    assert answer.parse_status == "failed" and answer.choice_index is None
    assert trace.steps[-1].outputs["parse_status"] == "failed"


def test_missing_facts_suppress_nothing_and_are_reported():
    llm = FakeLLM(answering('{"Reason": "x", "Answer": "Sydney"}', facts="I know a lot."))
    answer, trace, llm = run(llm=llm)
    assert trace.steps[0].outputs["parse_status"] == "failed" and trace.steps[0].warnings
    assert all(v > 0 for v in llm.calls[-1].bias.as_dict().values())
    assert answer.text == "Sydney"


def test_free_form_questions_get_a_short_biased_answer():
    llm = FakeLLM(answering("Sydney"))
    answer, _, llm = run(question=Question("What is the capital of Australia?"), llm=llm)
    assert answer.text == "Sydney" and llm.calls[-1].bias and llm.calls[-1].max_tokens == 48


def test_probe_records_option_probabilities_with_and_without_the_bias():
    prior = {"Canberra": 0.0, "Sydney": -1.5}
    llm = FakeLLM(respond, choice_prior=prior.__getitem__)
    _, trace, _ = run(CSRAGConfig(probe_choices=True), llm=llm)
    probs = trace.steps[-1].outputs["choice_probabilities"]
    assert probs["without_bias"]["Canberra"] > 0.5 > probs["with_bias"]["Canberra"]


def test_enhanced_context_names_each_paraphrase_after_its_passage():
    out = enhanced_context(P, [Paraphrases(["one", "two"])])
    assert [p.id for p in out] == ["gazette", "gazette#paraphrase1", "gazette#paraphrase2"]
    assert out[1].title == "Gazette (paraphrase 1)" and out[2].meta["paraphrase_of"] == "gazette"


# ------------------------------------------------------------------ conflict report

def test_facts_naming_another_option_than_the_context_answer_are_context_vs_memory():
    _, trace, llm = run()
    (conflict,) = trace.conflicts
    assert (conflict.kind, conflict.stage, conflict.action) == ("context_vs_memory", "csrag",
                                                                "kept")
    memory, context = conflict.sides
    assert (memory.answer, memory.quote, memory.source) == ("Canberra",
                                                            "Canberra is the capital.", "memory")
    assert (context.answer, context.passages, context.quote) == (
        "Sydney", ["gazette"], "Since 2031 the capital is Sydney.")
    assert [(c.kind, c.status) for c in trace.checks] == [("context_vs_memory", "conflict")]
    assert [c.purpose for c in llm.calls] == ["facts", "paraphrase", "paraphrase", "answer"]


@pytest.mark.parametrize("facts, answer, status", [
    ("- Sydney is the capital.", "Sydney", "no_conflict"),
    ("I know a lot.", "Sydney", "could_not_tell"),  # no fact list
    ("- Sydney is the capital.\n- Canberra is the capital.", "Sydney", "could_not_tell"),
    ("- Sydney and Canberra are cities.", "Sydney", "could_not_tell"),  # names no one option
    ("- Canberra is the capital.", "Perth", "could_not_tell"),  # the answer names no option
    ("- Sydney is the capital.", "Canberra", "could_not_tell"),  # no passage holds Canberra
])
def test_a_conflict_needs_one_remembered_option_and_a_passage_for_the_chosen_one(facts, answer,
                                                                                 status):
    reply = f'{{"Reason": "x", "Answer": "{answer}"}}'
    _, trace, _ = run(llm=FakeLLM(answering(reply, facts=facts)))
    assert trace.conflicts == []
    assert [(c.kind, c.status) for c in trace.checks] == [("context_vs_memory", status)]


def test_a_fact_naming_several_options_does_not_hide_the_one_that_names_one():
    facts = "- The capital moved from Canberra to Sydney.\n- Canberra is the capital."
    _, trace, _ = run(llm=FakeLLM(answering('{"Reason": "x", "Answer": "Sydney"}', facts=facts)))
    (conflict,) = trace.conflicts
    memory = conflict.sides[0]
    assert (memory.answer, memory.quote) == ("Canberra", "Canberra is the capital.")


def test_free_form_answers_get_no_memory_check():
    _, trace, _ = run(question=Question("What is the capital of Australia?"),
                      llm=FakeLLM(answering("Sydney")))
    assert trace.checks == [] and trace.conflicts == []

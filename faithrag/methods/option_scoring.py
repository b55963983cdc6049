"""Answering by option scoring: the option with the highest log-probability after the context,
under an optional bias, with named variant biases scored alongside. Shared by the
`choice_scoring` stage, CSRAG's choice mode and CoT-JSON's scored Answer slot (`picked_option`).

No free text is generated, so there is nothing to mis-parse: the baseline for small models that
break output formats."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from faithrag.llm.base import (
    LLM,
    ChoiceRequest,
    ChoiceScores,
    Message,
    TokenBias,
    score_choices_under,
)
from faithrag.methods.common import DATA_NOT_INSTRUCTIONS, fit, render_choices, render_passages
from faithrag.types import Answer, Passage, Question, Step

SYSTEM = "Answer strictly according to the given context. " + DATA_NOT_INSTRUCTIONS
ANSWER_PREFIX = "Answer: "


def render_prompt(question: Question, titles: list[str]):
    def render(texts: list[str]) -> tuple[Message, ...]:
        user = (f"Context:\n{render_passages(texts, titles)}\n\nQuestion: {question.text.strip()}"
                f"\nOptions:\n{render_choices(question.choices or [])}\n\n"
                "Reply with the text of the correct option.")
        return (Message("system", SYSTEM), Message("user", user))
    return render


def answer_by_scoring(llm: LLM, question: Question, passages: list[Passage], step: Step,
                      bias: TokenBias | None = None,
                      variants: Mapping[str, TokenBias | None] | None = None) -> Answer:
    """The option with the highest log-probability under `bias`. Each of `variants` (named
    biases) is scored from the same prompt too, in the same call where the backend can, and
    its pick is recorded in `meta["variants"]`: ablations at the cost of one answer."""
    choices = tuple(question.choices or ())
    reserve = max(len(llm.tokenize(ANSWER_PREFIX + c)) for c in choices) + 8
    fitted = fit(llm, render_prompt(question, [p.title for p in passages]), passages, reserve, step)
    request = ChoiceRequest(fitted.messages, choices, ANSWER_PREFIX, bias, purpose="score_choices")
    return pick_option(llm, request, step, variants)


def pick_option(llm: LLM, request: ChoiceRequest, step: Step,
                variants: Mapping[str, TokenBias | None] | None = None,
                options: Sequence[str] | None = None) -> Answer:
    """The option of `request` with the highest log-probability under its bias, every named
    variant bias scored alongside (recorded in `meta["variants"]`), the calls recorded on `step`.
    `options` names the choices in the answer when they were scored in another form."""
    variants = dict(variants or {})
    every = score_choices_under(llm, request, [request.bias, *variants.values()])
    return picked_option(request.purpose, options or request.choices, every, step, variants)


def picked_option(purpose: str, choices: Sequence[str], every: Sequence[ChoiceScores],
                  step: Step, variants: Mapping[str, TokenBias | None]) -> Answer:
    """`pick_option`'s answer from scores already computed: `every[0]` under the request's
    bias, then one per variant in order. The backends' warnings go on the step; the largest
    `probability_error` (when not exact) goes into the answer's meta."""
    for scored in (s for s in every if not s.shared_pass):
        step.record_llm(purpose, scored.prompt_tokens, sum(scored.token_counts), scored.seconds)
    scores = every[0]
    meta: dict[str, object] = {"choice_probabilities": dict(zip(choices, scores.probabilities()))}
    bound = max(s.probability_error for s in every)
    if bound:  # a server backend bounded a bias's normaliser instead of reading it
        meta["probability_error"] = bound
    step.warnings.extend(w for s in every for w in s.warnings if w not in step.warnings)
    if variants:
        meta["variants"] = {name: {"choice_index": s.best, "probabilities": s.probabilities()}
                            for name, s in zip(variants, every[1:])}
    return Answer(text=choices[scores.best], choice_index=scores.best, meta=meta)

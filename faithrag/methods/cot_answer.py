"""The CSRAG paper's answer prompt: reason step by step from the context, reply as JSON with
"Reason" and "Answer", the Answer being exactly one of the options.

Without a bias this is the fair "same-prompt" baseline for CSRAG; CSRAG itself reuses it with
its enhanced context and token bias (`bias` argument).

Scored variant (`answer_json_scored`, for small models that break the format): the reply is
generated up to its "Answer" key, then the options are scored in the Answer slot, so every item
gets an option and the model's own reasoning still precedes it.

Shared by the `cot_json` and `cot_json_scored` stages and CSRAG's JSON modes."""

from __future__ import annotations

import json
from collections.abc import Mapping

from faithrag.llm.base import (
    LLM,
    ChoiceRequest,
    Completion,
    GenerationRequest,
    Message,
    TokenBias,
    generate_then_score,
)
from faithrag.methods.common import (
    DATA_NOT_INSTRUCTIONS,
    fit,
    generate,
    record_completion,
    render_passages,
)
from faithrag.methods.json_answer import parse_json_answer, read_reason
from faithrag.methods.option_scoring import picked_option
from faithrag.methods.schemas import choice_answer_schema
from faithrag.types import PARSE_FAILED, Answer, Passage, Question, Step

SYSTEM = ("You answer multiple-choice questions strictly according to the given context, even "
          "when it disagrees with what you believe. " + DATA_NOT_INSTRUCTIONS)
INSTRUCTION = (
    "Reply with a JSON object only, with no text before or after it. Reason step by step from "
    "the context in \"Reason\" (at most three sentences), then copy exactly one option into "
    "\"Answer\":\n"
    '{"Reason": "<your reasoning>", "Answer": "<one option, copied exactly>"}')


def render_prompt(question: Question, titles: list[str]):
    options = "\n".join(f"- {c}" for c in question.choices or [])

    def render(texts: list[str]) -> tuple[Message, ...]:
        user = (f"Context:\n{render_passages(texts, titles)}\n\nQuestion: {question.text.strip()}"
                f"\nOptions:\n{options}\n\n{INSTRUCTION}")
        return (Message("system", SYSTEM), Message("user", user))
    return render


def answer_json(llm: LLM, question: Question, passages: list[Passage], step: Step,
                max_tokens: int, bias: TokenBias | None = None) -> Answer:
    """One CoT-JSON answer call (optionally biased), parsed; failures are marked, not guessed."""
    fitted = fit(llm, render_prompt(question, [p.title for p in passages]), passages,
                 max_tokens, step)
    request = GenerationRequest(fitted.messages, max_tokens=max_tokens, bias=bias,
                                purpose="answer",
                                schema=choice_answer_schema(question.choices or (), max_tokens))
    raw = generate(llm, [request], step)[0].text
    parsed = parse_json_answer(raw, question.choices or [])
    if parsed.choice_index is None:
        return Answer(text=parsed.answer or raw.strip(), reason=parsed.reason,
                      parse_status=PARSE_FAILED, raw=raw)
    return Answer(text=question.choices[parsed.choice_index], choice_index=parsed.choice_index,
                  reason=parsed.reason, raw=raw)


# the reply is cut where it names its Answer key, in the spellings small models use
ANSWER_KEYS = ('"Answer"', "'Answer'", '"answer"')


def answer_json_scored(llm: LLM, question: Question, passages: list[Passage], step: Step,
                       max_tokens: int, bias: TokenBias | None = None,
                       variants: Mapping[str, TokenBias | None] | None = None) -> Answer:
    """The CoT-JSON reply generated without bias up to its "Answer" key, then the options scored
    after `{"Reason": <its reason>, "Answer": "` under `bias` (and each of `variants`).

    Each option is scored JSON-escaped and with its closing quote, so an option that is the
    start of another ("Paris" and "Paris, Texas") does not win by being shorter. The reason is
    re-serialised, so a reply cut by the token cap or written without a Reason key still gets a
    well-formed slot; how it was read is in `meta["reason_status"]` ("trimmed" when its escaped
    form had to be cut to fit the room reserved for it). Generation and scoring are one backend
    call (`generate_then_score`): llama.cpp scores from the cache the reply left."""
    choices = tuple(question.choices or ())
    quoted = tuple(json.dumps(c, ensure_ascii=False)[1:] for c in choices)  # escaped, closed
    slot_room = max_tokens + SLOT_MARGIN
    reserve = slot_room + max(len(llm.tokenize(q)) for q in quoted)
    fitted = fit(llm, render_prompt(question, [p.title for p in passages]), passages, reserve,
                 step)
    request = GenerationRequest(fitted.messages, max_tokens=max_tokens, stop=ANSWER_KEYS,
                                purpose="reason", schema=choice_answer_schema(choices, max_tokens))

    read: list[tuple[str, str, str]] = []  # (reason, how it was read, the slot built from it)

    def slot(completion: Completion) -> ChoiceRequest:
        reason, status = read_reason(completion.text)
        read.append((reason, status, answer_slot(llm, reason, slot_room)))
        return ChoiceRequest(fitted.messages, quoted, read[-1][2], bias, purpose="score_answer")

    variants = dict(variants or {})
    completion, every = generate_then_score(llm, request, slot, [bias, *variants.values()])
    record_completion(step, request, completion)
    answer = picked_option("score_answer", choices, every, step, variants)
    answer.reason, status, prefix = read[-1]
    answer.meta["reason_status"] = "trimmed" if prefix != _slot(answer.reason) else status
    answer.raw = completion.text
    return answer


SLOT_MARGIN = 16  # tokens reserved for the slot beyond the reply: its wrapper and escapes


def _slot(reason: str) -> str:
    return '{"Reason": ' + json.dumps(reason, ensure_ascii=False) + ', "Answer": "'


def answer_slot(llm: LLM, reason: str, room: int) -> str:
    """`{"Reason": <reason>, "Answer": "` in at most `room` tokens: the reason is cut from its
    end when its escaped form outgrows the room (the reply it came from fitted, but quotes and
    newlines escape to more tokens)."""
    prefix = _slot(reason)
    excess = len(llm.tokenize(prefix)) - room
    while excess > 0 and reason:
        ids = llm.tokenize(reason)
        reason = llm.detokenize(ids[:max(len(ids) - excess - 1, 0)])
        prefix = _slot(reason)
        excess = len(llm.tokenize(prefix)) - room
    return prefix

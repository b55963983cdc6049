"""The CSRAG paper's answer prompt: reason step by step from the context, reply as JSON with
"Reason" and "Answer", the Answer being exactly one of the options.

Without a bias this is the fair "same-prompt" baseline for CSRAG; CSRAG itself reuses it with
its enhanced context and token bias (`bias` argument)."""

from __future__ import annotations

from faithrag.errors import ConfigError
from faithrag.llm.base import LLM, GenerationRequest, Message, TokenBias
from faithrag.methods.common import DATA_NOT_INSTRUCTIONS, fit, generate, render_passages
from faithrag.methods.json_answer import parse_json_answer
from faithrag.types import PARSE_FAILED, Answer, Passage, Question, Step, Trace

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
                                purpose="answer")
    raw = generate(llm, [request], step)[0].text
    parsed = parse_json_answer(raw, question.choices or [])
    if parsed.choice_index is None:
        return Answer(text=parsed.answer or raw.strip(), reason=parsed.reason,
                      parse_status=PARSE_FAILED, raw=raw)
    return Answer(text=question.choices[parsed.choice_index], choice_index=parsed.choice_index,
                  reason=parsed.reason, raw=raw)


class CoTJSON:
    name = "cot_json"

    def __init__(self, llm: LLM, max_tokens: int = 256):
        self.llm = llm
        self.max_tokens = max_tokens

    def generate(self, question: Question, passages: list[Passage], trace: Trace) -> Answer:
        if not question.choices:
            raise ConfigError("The cot_json method needs answer options.",
                              "Pass --choices, or use a multiple-choice dataset.")
        with trace.step("generate", self.name, question=question.text,
                        passages=[p.id for p in passages]) as step:
            answer = answer_json(self.llm, question, passages, step, self.max_tokens)
            step.outputs = {"answer": answer.text, "reason": answer.reason,
                            "parse_status": answer.parse_status}
            return answer

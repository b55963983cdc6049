"""CSRAG step 1: the facts the model itself believes about the question (its parametric memory),
listed before it sees any context. Their tokens are what the decoding bias suppresses."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from faithrag.llm.base import LLM, GenerationRequest, Message, model_identity
from faithrag.methods.common import generate
from faithrag.methods.csrag.cache import JsonCache, cache_key
from faithrag.types import Question, Step

PROMPT_VERSION = "facts-1"
SYSTEM = "You state what you know, briefly and precisely."
INSTRUCTION = (
    "Without looking anything up, list between 5 and 10 short facts that you know and that "
    "bear on the question below. Put each fact on its own line starting with \"- \". State "
    "facts only: no introduction, no conclusion, no answer options.\n\n"
    "Question: {question}")
MAX_FACTS = 10

# "- fact", "* fact", "• fact", "1. fact", "1) fact"
_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)])\s+(.*\S)\s*$")


@dataclass
class Facts:
    items: list[str] = field(default_factory=list)
    raw: str = ""

    @property
    def parsed(self) -> bool:
        return bool(self.items)

    @property
    def text(self) -> str:
        return "\n".join(self.items)


def parse_facts(raw: str) -> Facts:
    """List items of the output, at most ten. Prose without list markers yields no facts:
    it is counted as a parse failure by the caller rather than guessed at."""
    items = []
    for line in raw.splitlines():
        match = _ITEM.match(line)
        if match:
            fact = match.group(1).strip()
            if fact and fact not in items:
                items.append(fact)
    return Facts(items[:MAX_FACTS], raw)


def facts_request(question: Question, max_tokens: int) -> GenerationRequest:
    messages = (Message("system", SYSTEM),
                Message("user", INSTRUCTION.format(question=question.text.strip())))
    return GenerationRequest(messages, max_tokens=max_tokens, purpose="facts")


def extract_facts(llm: LLM, question: Question, step: Step, max_tokens: int,
                  cache: JsonCache | None = None) -> Facts:
    """The model's facts about the question; at temperature 0 the same question always gets the
    same list, so it may be cached (keyed by model, prompt version, question and token cap)."""
    key = cache_key(model_identity(llm), PROMPT_VERSION, max_tokens,
                    question.text.strip())
    entry = cache.get(key) if cache else None
    if entry is not None and isinstance(entry.get("raw"), str):
        step.outputs["cached"] = True
        return parse_facts(entry["raw"])
    raw = generate(llm, [facts_request(question, max_tokens)], step)[0].text
    if cache:
        cache.put(key, {"raw": raw})
    return parse_facts(raw)

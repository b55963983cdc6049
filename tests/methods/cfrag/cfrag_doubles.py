"""Test doubles for CF-RAG: a keyword embedder (similarities are easy to compute by hand) and the
Apollo 11 correlation-trap scenario scripted for FakeLLM."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from faithrag.llm.base import GenerationRequest
from faithrag.methods.cfrag.counterfactuals import ANSWER_INSTRUCTION, CHANGES
from faithrag.methods.cfrag.parsing import parse_counterfactuals
from faithrag.types import Passage

VOCABULARY = ["first", "second", "person", "step", "moon", "apollo", "11", "12", "mars",
              "armstrong", "aldrin", "commander", "photo", "camera", "capital", "france", "dog",
              "boot", "lunar", "pilot"]


class KeywordEmbedder:
    """One dimension per vocabulary word (its count in the text), plus one constant dimension so
    no text is the zero vector; rows are L2-normalised."""

    name = "keywords"
    identity = "keywords"
    dim = len(VOCABULARY) + 1

    def __init__(self):
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            words = re.findall(r"[a-z0-9]+", text.lower())
            row = [float(words.count(w)) for w in VOCABULARY] + [0.05]
            rows.append(row)
        x = np.array(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


QUESTION = "Who was the first person to step onto the Moon during Apollo 11?"
COUNTERFACTUALS = """Here are the variants.
ORIGINAL => Neil Armstrong
1. role: Who was the second person to step onto the Moon during Apollo 11? => Buzz Aldrin
2. temporal: Who was the first person to step onto the Moon during Apollo 12? => Pete Conrad
3. entity: Who was the first person to step onto Mars? => unknown
4. categorical: Who was the first dog to step onto the Moon during Apollo 11? => Neil Armstrong
5. scope: What is the capital of France? => Paris"""

PASSAGES = [
    Passage("armstrong", "On 21 July 1969 commander Neil Armstrong was the first person to step "
                         "onto the Moon.", title="Apollo 11 timeline"),
    Passage("aldrin", "Buzz Aldrin, lunar module pilot, was the second person to step onto the "
                      "Moon during Apollo 11.", title="Buzz Aldrin"),
    Passage("photos", "Most photo images of the Apollo 11 Moon walk show Aldrin; the commander "
                      "held the camera.", title="Photographs"),
    Passage("boot", "Aldrin's boot print on the Moon became the icon of Apollo 11.",
            title="Boot print"),
    Passage("apollo12", "Pete Conrad was the first person to step onto the Moon during Apollo 12.",
            title="Apollo 12"),
    Passage("paris", "Paris is the capital of France.", title="France"),
]


def counterfactual_reply(request: GenerationRequest, listing: str = COUNTERFACTUALS) -> str:
    """The line of `listing` that answers this request (the answer, or the variant of a type)."""
    prompt = request.messages[-1].content
    parsed = parse_counterfactuals(listing)
    if ANSWER_INSTRUCTION in prompt:
        return parsed.original_answer or "unknown"
    for cand in parsed.candidates:
        if CHANGES[cand.type][0] in prompt:
            return f"{cand.question} => {cand.answer or 'unknown'}"
    return "I cannot do that."


def draft_by_evidence(request: GenerationRequest) -> str:
    """The scripted model: Armstrong when his passage is in the prompt, else Aldrin."""
    prompt = request.messages[-1].content
    if request.purpose == "counterfactuals":
        return counterfactual_reply(request)
    if request.purpose == "synthesis":
        return "Neil Armstrong"
    if "Neil Armstrong was the first person" in prompt:
        return "Rationale: the timeline says the commander stepped first.\nAnswer: Neil Armstrong"
    return "Rationale: the photos of the Moon walk show Aldrin.\nAnswer: Buzz Aldrin"

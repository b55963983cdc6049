"""What the adapter tests share: a script that answers faithrag's crossval and antisyco prompts
by their text, as a framework's chat model sees them (no request purpose, only messages)."""

from __future__ import annotations

import re

import pytest

PASSAGE = re.compile(r'<passage id="(\w+)"[^>]*>\n(.*?)\n</passage>', re.DOTALL)
YEAR = re.compile(r"1\d{3}")
# each prompt's purpose, by a phrase of its instruction
PURPOSES = (('"Conflict: [i] [j]"', "detect_conflict"), ("False passage:", "cross_validate"),
            ("from the most to the least useful", "rank"), ("RELEVANCE: RELEVANT", "relevance"),
            ("SUPPORT: SUPPORTED", "support"), ("one statement per line", "claims"),
            ("short phrase copied from the reference", "contradiction"))


def year(text: str) -> str:
    found = YEAR.search(text)
    return found.group(0) if found else ""


def purpose_of(prompt: str) -> str:
    return next((purpose for phrase, purpose in PURPOSES if phrase in prompt), "answer")


def script(trusted_year: str):
    """`reply(prompt)`: detection names the first two shown passages that give different
    years, the verdict calls false the side fewer other passages agree with, ranking reverses
    the shown order (so that faithrag's order differs from the retriever's); the verifier's
    judgements read the trusted knowledge base as giving `trusted_year`."""
    judgements = {"relevance": "RELEVANCE: RELEVANT\nSCORE: 0.9", "support": "SUPPORT: PARTIAL",
                  "claims": "- The answer is that year.",
                  "contradiction": f"ANSWER: {trusted_year}", "answer": trusted_year}

    def reply(prompt: str) -> str:
        shown = PASSAGE.findall(prompt)
        purpose = purpose_of(prompt)
        if purpose == "detect_conflict":
            dated = [(i, year(t)) for i, t in shown if year(t)]
            pair = next(((a, b) for a, ya in dated for b, yb in dated if ya != yb), None)
            return f"Conflict: [{pair[0]}] [{pair[1]}]" if pair else "Conflict: None"
        if purpose == "cross_validate":
            years = {i: year(t) for i, t in shown}
            support = {side: sum(years[side] == y for i, y in years.items() if i not in "AB")
                       for side in "AB"}
            false = min("AB", key=support.get)
            return f"Reason: {false} disagrees with the others.\nFalse passage: {false}"
        if purpose == "rank":
            return " > ".join(f"[{i}]" for i, _ in reversed(shown))
        return judgements[purpose]
    return reply


@pytest.fixture
def chat_script():
    """`script`, to make the script of another subject."""
    return script


@pytest.fixture
def bridge_script():
    """The script of `script` for the Aldermoor Bridge, which opened in 1887."""
    return script("1887")

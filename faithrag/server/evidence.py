"""Which of a result's passages the generator actually saw, read off its trace.

A pipeline hands the generator its passages; the generator fits them into the model's context
window (faithrag.methods.common.fit keeps a prefix, cuts the first passage that does not fit,
drops the rest, and records what the prompt held in `Step.evidence`), or reads none of them
(closed_book), or drafts from subsets it samples (CF-RAG). `generator_view` turns that record into the list of
passages to show, cut ones with the text the model read, and a count of what was dropped and
why:

    view = generator_view(result, llm)
    view.passages   # exactly what reached the generator
    view.summary    # {"given": 1000, "seen": 150, "dropped": 850, "cut": ["p150"], "reason": ...}
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from faithrag.llm.base import LLM
from faithrag.pipeline import Result
from faithrag.types import Passage, Step


@dataclass
class GeneratorView:
    passages: list[Passage]
    summary: dict[str, Any] = field(default_factory=dict)


def _seen_through_fit(steps: list[Step], cut: dict[str, str]) -> set[str] | None:
    """Ids held by the prompts of generate steps that framed passages (`Step.evidence`); None
    if no step did. A passage cut to fit goes into `cut` with the text that was kept."""
    framed = [s.evidence for s in steps if s.evidence]
    for evidence in framed:
        cut.update(evidence["cut"])
    return {pid for evidence in framed for pid in evidence["seen"]} if framed else None


def _seen_in_drafts(steps: list[Step]) -> set[str] | None:
    drafts = [s for s in steps if isinstance(s.outputs.get("hypotheses"), list)]
    if not drafts:
        return None
    return {pid for s in drafts for h in s.outputs["hypotheses"] for pid in h.get("evidence", [])}


def generator_view(result: Result, llm: LLM) -> GeneratorView:
    given = result.passages
    steps = [s for s in result.trace.steps if s.stage == "generate"]
    cut: dict[str, str] = {}
    seen = _seen_in_drafts(steps)
    reason = "the method drafts its answers from evidence subsets it samples"
    if seen is None:
        seen = _seen_through_fit(steps, cut)
        reason = (f"the model's context window ({llm.context_window} tokens, less the room "
                  "for the answer) holds only these; the rest were left out of the prompt")
    if seen is None:
        seen, reason = set(), "the method answers without passages"
    passages = [replace(p, text=cut.get(p.id, p.text)) for p in given if p.id in seen]
    dropped = len(given) - len(passages)
    summary: dict[str, Any] = {"given": len(given), "seen": len(passages), "dropped": dropped,
                               "cut": [p.id for p in passages if p.id in cut]}
    summary["reason"] = reason if dropped or cut else ""
    return GeneratorView(passages, summary)

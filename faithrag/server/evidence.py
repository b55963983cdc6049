"""Which of a result's passages the generator actually saw, read off its trace.

A pipeline hands the generator its passages; the generator fits them into the model's context
window (faithrag.llm.budget.fit_evidence keeps a prefix, cuts the first passage that does not fit
and drops the rest, and records that on its step), or reads none of them (closed_book), or
drafts from subsets it samples (CF-RAG). `generator_view` turns that record into the list of
passages to show, cut ones with the text the model read, and a count of what was dropped and
why:

    view = generator_view(result, llm)
    view.passages   # exactly what reached the generator
    view.summary    # {"given": 1000, "seen": 150, "dropped": 850, "cut": ["p150"], "reason": ...}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from faithrag.llm.base import LLM
from faithrag.pipeline import Result
from faithrag.types import Passage, Step

# The record fit_evidence leaves on a step when the evidence did not fit.
TRUNCATED = re.compile(r"evidence truncated to fit the context window: kept (\d+) of \d+ "
                       r"evidence tokens \((\d+) of (\d+) passages")


@dataclass
class GeneratorView:
    passages: list[Passage]
    summary: dict[str, Any] = field(default_factory=dict)


def _kept_prefix(step: Step) -> tuple[int, int] | None:
    """(passages kept, evidence tokens kept) of the tightest fit recorded on `step`."""
    fits = [(int(m[2]), int(m[1])) for w in step.warnings if (m := TRUNCATED.search(w))]
    return min(fits) if fits else None


def _seen_through_fit(steps: list[Step], given: list[Passage], llm: LLM,
                      cut: dict[str, str]) -> set[str] | None:
    """Ids seen by generate steps that name the passages they were handed; None if no step
    does. A passage cut to fit goes into `cut` with the text that was kept."""
    by_id = {p.id: p for p in given}
    seen: set[str] = set()
    named = False
    for step in steps:
        ids = step.inputs.get("passages")
        if not isinstance(ids, list):
            continue
        named = True
        fit = _kept_prefix(step)
        if fit is None:
            seen.update(ids)
            continue
        kept, kept_tokens = fit
        seen.update(ids[:kept])
        if kept == 0:
            continue
        whole, last = ids[:kept - 1], ids[kept - 1]
        if last in by_id and all(i in by_id for i in whole):
            tokens = llm.tokenize(by_id[last].text)
            room = kept_tokens - sum(len(llm.tokenize(by_id[i].text)) for i in whole)
            if 0 <= room < len(tokens):
                cut[last] = llm.detokenize(tokens[:room])
    return seen if named else None


def _seen_in_drafts(steps: list[Step]) -> set[str] | None:
    drafts = [s for s in steps if isinstance(s.outputs.get("hypotheses"), list)]
    if not drafts:
        return None
    return {pid for s in drafts for h in s.outputs["hypotheses"] for pid in h.get("evidence", [])}


def generator_view(result: Result, llm: LLM) -> GeneratorView:
    given = result.passages
    steps = [s for s in result.trace.steps if s.stage == "generate"]
    cut: dict[str, str] = {}
    seen = _seen_through_fit(steps, given, llm, cut)
    if seen is not None:
        reason = (f"the model's context window ({llm.context_window} tokens, less the room "
                  "for the answer) holds only these; the rest were left out of the prompt")
    else:
        seen = _seen_in_drafts(steps)
        reason = "the method drafts its answers from evidence subsets it samples"
        if seen is None:
            seen, reason = set(), "the method answers without passages"
    passages = [replace(p, text=cut.get(p.id, p.text)) for p in given if p.id in seen]
    dropped = len(given) - len(passages)
    summary: dict[str, Any] = {"given": len(given), "seen": len(passages), "dropped": dropped,
                               "cut": [p.id for p in passages if p.id in cut]}
    summary["reason"] = reason if dropped or cut else ""
    return GeneratorView(passages, summary)

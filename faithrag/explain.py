"""Human-readable rendering of a pipeline result and its trace (what `--explain` prints)."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from faithrag.pipeline import Result
from faithrag.types import ConflictSide


def _short(value: Any, width: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return textwrap.shorten(text, width=width, placeholder=" …")


def _render_output(key: str, value: Any, indent: str = "    ") -> list[str]:
    """One line per scalar; lists and dicts one item per line (lists at most 12 items)."""
    if isinstance(value, dict) and value:
        lines = [f"{indent}{key}:"]
        for k, v in value.items():
            lines.extend(_render_output(str(k), v, indent + "  "))
        return lines
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        lines = [f"{indent}{key}:"] + [f"{indent}  - {_short(v, 200)}" for v in value[:12]]
        if len(value) > 12:
            lines.append(f"{indent}  … {len(value) - 12} more")
        return lines
    return [f"{indent}{key}: {_short(value)}"]


def render_answer(result: Result) -> str:
    status = "" if result.answer.parse_status == "ok" else f"  [{result.answer.parse_status}]"
    return f"Answer: {result.answer.text}{status}"


def render_side(side: ConflictSide) -> str:
    """One side of a conflict on one line: its answer (or the start of its quote when it has
    none), then the passages or the source it came from."""
    said = (f'"{side.answer}"' if side.answer.strip()
            else f"(no answer read) {_short(side.quote.splitlines()[0], 70) if side.quote else ''}")
    where = ", ".join(f"[{i}]" for i in side.passages) or side.source
    source = f" ({side.source})" if side.passages and side.source else ""
    return f"{said.strip()} per {where}{source}" if where else said.strip()


def render_conflicts(result: Result) -> str:
    """The conflict report as a short block: each conflict's kind, stage, action and
    confidence, then its sides with their passage ids; then the checks that could not tell.
    Empty when there is nothing to say."""
    lines = []
    if result.conflicts:
        lines.append(f"Conflicts ({len(result.conflicts)}):")
    for conflict in result.conflicts:
        sure = (f", confidence {conflict.confidence:.2f}" if conflict.confidence is not None
                else "")
        lines.append(f"  - {conflict.kind} (by {conflict.stage}: {conflict.action}{sure})")
        lines.extend(f"      {render_side(side)}" for side in conflict.sides)
    unsure = sorted({f"{c.kind} ({c.stage})" for c in result.conflict_checks
                     if c.status == "could_not_tell"})
    if unsure:
        lines.append("Could not tell: " + ", ".join(unsure))
    return "\n".join(lines)


def render_explanation(result: Result) -> str:
    lines = [f"Question: {result.question.text}"]
    if result.question.choices:
        lines.append("Options: " + " | ".join(result.question.choices))
    lines.append("")
    lines.append(f"Evidence ({len(result.passages)} passages given to the generator):")
    for i, p in enumerate(result.passages, 1):
        score = f" score={p.score:.3f}" if p.score is not None else ""
        lines.append(f"  [{i}] {p.id} ({p.source or 'unknown source'}){score}")
        lines.append(textwrap.indent(textwrap.fill(_short(p.text, 400), 96), "      "))
    view = result.evidence
    if view is not None and (view.dropped or view.cut):
        lines.append(f"  the generator saw {len(view.seen)} of them"
                     + (f"; left out: {', '.join(view.dropped)}" if view.dropped else "")
                     + (f"; cut to fit: {', '.join(view.cut)}" if view.cut else "")
                     + f" ({view.reason})")
    for r in result.removed:
        lines.append(f"  removed {r.passage.id}: {r.reason}")
    lines.append("")
    lines.append("Stages:")
    for step in result.trace.steps:
        tokens = (f", {len(step.llm_calls)} LLM calls, {step.prompt_tokens}+"
                  f"{step.completion_tokens} tokens" if step.llm_calls else "")
        lines.append(f"  {step.stage}/{step.name}: {step.seconds:.2f}s{tokens}")
        if step.decision:
            lines.append(f"    decision: {step.decision}")
        for key, value in step.outputs.items():
            lines.extend(_render_output(key, value))
        for warning in step.warnings:
            lines.append(f"    warning: {warning}")
    lines.append("")
    lines.append(render_answer(result))
    if result.answer.reason:
        lines.append(f"Reason: {result.answer.reason}")
    conflicts = render_conflicts(result)
    if conflicts:
        lines.extend(["", conflicts])
    return "\n".join(lines)

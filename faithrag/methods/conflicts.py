"""The conflict report's shared pieces: quoting a side from its passages, and the pipeline's
`on_conflict` policy.

Quoting: a side never invents its text. `excerpt` quotes the sentence of a passage that holds
the side's answer (whole tokens), else the passage's start, at most `QUOTE_CHARS` characters;
`passages_side` builds a side from the passages behind one answer.

The policy (`apply_on_conflict`), applied by `Pipeline.run` after every stage has run, acts
on the conflicts of a kind in `types.POLICY_KINDS` (`passage_vs_passage`, `ambiguous`,
`contradicted_by_trusted_kb`):
- "resolve": the stages' own decision stands (nothing here runs).
- "surface": the answer gives each reading with its sources, e.g. "Mutemath (per [p1]); The
  Beatles (per [p2]) — the sources disagree". Readings are the sides' answers, merged across
  conflicts when two are the same answer; a side with no answer read is given by a short quote
  of its passage. For a multiple-choice question the stage's pick stays in `choice_index` (a
  caller that needs one option still has it) and the text lists the readings.
- "flag": the stages' answer stands and names the passages that give another answer, e.g.
  "Mutemath — the sources disagree ([p2])": the user is told, and a reading that may be
  injected or edited is not repeated (its side, with its quote, is in the conflict report).
- "by_kind": "flag" where one side is known to be wrong, "surface" where the evidence may
  hold several right answers: a `passage_vs_passage` conflict whose sides hold two versions of
  one text with a stretch changed (`poison_signals.altered_copies` over the passages given: an
  edited copy, one version is wrong) and `contradicted_by_trusted_kb` are flagged, and so is
  every conflict when the answer rests on a trusted source: the source confirmed it
  (`Answer.meta["confirmed_by_trusted_kb"]`, set by a verifier) or the answer was repaired
  against it (a `contradicted_by_trusted_kb` conflict with the action "repaired"), so no
  passage's reading takes the verified answer's place; `ambiguous` and a disagreement between
  independent passages (a question may have several answers, the passages may speak of
  different subjects) are surfaced.
- "abstain": the answer says the evidence conflicts and lists the sides with their sources;
  `choice_index` is None.
`context_vs_memory` alone never changes the answer: the project trusts the retrieved context
over the model's memory (see DESIGN, "Whom to trust"); it is reported, not acted on.
`low_relevance` is reported, not acted on either (it is no disagreement between sides).
The conflicts acted on get the action "surfaced", "flagged" or "abstained" (the stage's own
action is kept in their note), and `Answer.meta` records `on_conflict`, the indices of those
conflicts in `Result.conflicts`, the answer the stages had given (`resolved_answer`) and
whether the text lists the readings (`readings_listed`).

Example:
    >>> from faithrag.types import Answer, Conflict, ConflictSide, Question
    >>> sides = [ConflictSide("Mutemath", "...", ["p1"]), ConflictSide("The Beatles", "...", ["p2"])]
    >>> conflict = Conflict("passage_vs_passage", "conflicts", sides, "reported")
    >>> apply_on_conflict(Question("Who?"), Answer("Mutemath"), [conflict], "surface").text
    'Mutemath (per [p1]); The Beatles (per [p2]) — the sources disagree'
    >>> apply_on_conflict(Question("Who?"), Answer("Mutemath"), [conflict], "flag").text
    'Mutemath — the sources disagree ([p2])'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from faithrag.answers import numeric_containment, same_answer
from faithrag.methods.poison_signals import altered_across
from faithrag.types import POLICY_KINDS, Answer, Conflict, ConflictSide, Passage, Question

QUOTE_CHARS = 240
SHORT_QUOTE_CHARS = 60  # a side without an answer, in a surfaced or abstaining answer
POLICIES = ("resolve", "surface", "flag", "by_kind", "abstain")  # pipeline.on_conflict

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def excerpt(text: str, answer: str = "", limit: int = QUOTE_CHARS) -> str:
    """The sentence of `text` that holds `answer` (whole tokens, or its quantities by value:
    faithrag.answers.numeric_containment), else the start of `text`, with
    runs of whitespace made single spaces, cut to `limit` characters with an ellipsis."""
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s.strip()] or [text.strip()]
    chosen = next((s for s in sentences if answer and numeric_containment(s, [answer])),
                  sentences[0])
    return _cut(" ".join(chosen.split()), limit)


def passages_side(answer: str, passages: Sequence[Passage]) -> ConflictSide:
    """The side that `passages` give `answer` for: a quote of each (one line per passage),
    their ids, and their distinct sources."""
    sources = dict.fromkeys(p.source for p in passages if p.source)
    return ConflictSide(answer, "\n".join(excerpt(p.text, answer) for p in passages),
                        [p.id for p in passages], ", ".join(sources))


def _label(side: ConflictSide) -> str:
    if side.answer.strip():
        return side.answer.strip()
    first = side.quote.strip().splitlines()[0] if side.quote.strip() else ""
    return f'"{_cut(first, SHORT_QUOTE_CHARS)}"' if first else "(no answer read)"


def readings(conflicts: Sequence[Conflict], question: Question) -> list[tuple[str, list[str]]]:
    """(reading, passage ids) for every side of `conflicts`; sides with the same answer are
    merged (their ids joined in order), sides without an answer stay apart."""
    merged: list[tuple[str, list[str]]] = []
    for conflict in conflicts:
        for side in conflict.sides:
            label = _label(side)
            ids = side.passages or ([side.source] if side.source else [])
            home = next((r for r in merged if side.answer.strip() and (
                r[0] == label if question.choices else same_answer(r[0], label))), None)
            if home is None:
                merged.append((label, list(ids)))
            else:
                home[1].extend(i for i in ids if i not in home[1])
    return merged


def _render(items: list[tuple[str, list[str]]]) -> str:
    return "; ".join(f"{label} (per {', '.join(f'[{i}]' for i in ids)})" if ids else label
                     for label, ids in items)


def _dissenting_ids(answer: Answer, conflicts: Sequence[Conflict],
                    question: Question) -> list[str]:
    """The passage ids of the sides of `conflicts` that do not give `answer` (all of them when
    none does), in order, each once."""
    def gives(side: ConflictSide) -> bool:
        if question.choices:
            return side.answer.strip() == answer.text.strip()
        return bool(side.answer.strip()) and same_answer(side.answer, answer.text)
    sides = [side for conflict in conflicts for side in conflict.sides]
    others = [side for side in sides if not gives(side)] if any(map(gives, sides)) else sides
    ids = [i for side in others for i in (side.passages or ([side.source] if side.source else []))]
    return list(dict.fromkeys(ids))


def holds_edited_copy(conflict: Conflict, passages: Sequence[Passage]) -> bool:
    """Whether two sides of `conflict` hold two versions of one text with a stretch changed
    (poison_signals.altered_copies over those of `passages` its sides name)."""
    by_id = {p.id: p for p in passages}
    named = [(n, by_id[i]) for n, side in enumerate(conflict.sides) for i in side.passages
             if i in by_id]
    return bool(altered_across([n for n, _ in named], [p.text for _, p in named],
                               [p.title for _, p in named]))


def _flagged_by_kind(conflict: Conflict, passages: Sequence[Passage]) -> bool:
    return conflict.kind == "contradicted_by_trusted_kb" or (
        conflict.kind == "passage_vs_passage" and holds_edited_copy(conflict, passages))


def _rests_on_trusted_kb(answer: Answer, conflicts: Sequence[Conflict]) -> bool:
    """Whether a trusted source decided `answer`: a verifier confirmed every claim of it, or
    repaired it against the source (one of `conflicts` is a repaired
    `contradicted_by_trusted_kb`)."""
    return bool(answer.meta.get("confirmed_by_trusted_kb")) or any(
        c.kind == "contradicted_by_trusted_kb" and c.action == "repaired" for c in conflicts)


def _mark(conflicts: Sequence[Conflict], action: str) -> None:
    for conflict in conflicts:
        stage_action = conflict.action
        conflict.action = action  # type: ignore[assignment]
        conflict.note = (f"{conflict.note}; " if conflict.note else "") + (
            f"the stage's action: {stage_action}")


def apply_on_conflict(question: Question, answer: Answer, conflicts: Sequence[Conflict],
                      policy: str, passages: Sequence[Passage] = ()) -> Answer:
    """The answer under `policy` (see the module docstring); `answer` itself when the policy is
    "resolve" or no conflict of `POLICY_KINDS` was reported. `passages`: the texts the
    conflicts' sides name ("by_kind" compares them). Sets the action of the conflicts acted
    on."""
    if policy not in POLICIES:
        raise ValueError(f"on_conflict must be one of {', '.join(POLICIES)}, got {policy!r}")
    acted = [i for i, c in enumerate(conflicts) if c.kind in POLICY_KINDS]
    if policy == "resolve" or not acted:
        return answer
    meta = {**answer.meta, "on_conflict": policy, "conflicts": acted,
            "resolved_answer": answer.text, "readings_listed": True}
    if policy == "abstain":
        chosen = [conflicts[i] for i in acted]
        _mark(chosen, "abstained")
        return Answer("The evidence conflicts, so no single answer is given: "
                      f"{_render(readings(chosen, question))}.", None, answer.reason,
                      answer.parse_status, answer.raw, meta)
    trusted = _rests_on_trusted_kb(answer, conflicts)
    shown = [i for i in acted if policy == "surface" or (
        policy == "by_kind" and not trusted and not _flagged_by_kind(conflicts[i], passages))]
    surfaced = [conflicts[i] for i in shown]
    flagged = [conflicts[i] for i in acted if i not in shown]
    text = answer.text
    if surfaced:
        tail = ("the sources speak of different subjects that share a name"
                if all(c.kind == "ambiguous" for c in surfaced) else "the sources disagree")
        text = f"{_render(readings(surfaced, question))} — {tail}"
    if flagged:
        ids = _dissenting_ids(answer, flagged, question)
        text += f" — the sources disagree ({', '.join(f'[{i}]' for i in ids)})" if ids else ""
    meta["readings_listed"] = bool(surfaced)
    _mark(surfaced, "surfaced")
    _mark(flagged, "flagged")
    return Answer(text, answer.choice_index, answer.reason, answer.parse_status, answer.raw, meta)

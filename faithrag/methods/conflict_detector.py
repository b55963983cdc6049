"""The conflict detector `conflicts`: reports the conflicts the evidence holds, changes nothing.

In: the question, the passages the generator saw (in order) and the pipeline's answer (the
draft). Out: the conflicts found, each with action "reported", and a `ConflictCheck` for every
kind looked at; both are recorded on one trace step (`detect/conflicts`), which is how they
reach `Result.conflicts` and `Result.conflict_checks`. The answer is never changed.

Model calls, all greedy, each answer bounded by `answer_tokens`, passages cut to
`passage_tokens`:
1. Memory, one request: the question alone (no passages), "Answer with a short phrase only, no
   explanation." (multiple choice: "Answer with the text of exactly one option, nothing
   else.") — the model's closed-book answer.
2. Reading, one request per passage, in the same `generate()` call as the memory request (a
   batching backend runs them together): the question and that passage alone, with crossval's
   side-answer instruction, 'What answer to the question does this passage give? Reply in one
   line: "ANSWER: <a short phrase>", or "ANSWER: NOT STATED" if the passage does not give
   one.' (multiple choice: "<the text of one option>").
3. Same subject, only when the passages give two or more different answers: the first passage
   of each of the two largest answer groups, judged by crossval's same-subject question ("A
   name in a question can refer to several different people, works, places or events. Do
   passages A and B speak about the same one? Answer Yes or No.") as choice scores — no
   generation — in both orders; the averaged log-odds of "Yes" below `same_subject_threshold`
   (config `conflicts.same_subject_threshold`; its default is crossval's, chosen on
   ramdocs_rank pairs) means different subjects.
So a question costs one `generate()` call with k + 1 requests, plus two scoring calls when the
passages disagree.

Reading a reply (`read_short_answer`): the first non-empty line, without an `ANSWER:` label,
markdown, quotes or a final period. "NOT STATED", NOT_IN_PASSAGE (any case, spaces or
underscores) or another way of saying the text does not give the answer ("not mentioned",
"unknown", "I don't know") is no answer. A reply that is empty, has no letter or digit, or was
cut at its token budget is unreadable. For multiple choice the answer must name exactly one
option (`match_choice`), else it is unreadable. A free-form reading must come from its passage
(`grounded`: at least half of its words occur there, or it is a yes/no answer); otherwise it is
the model's memory and counts as no answer (status "ungrounded").
Two answers are the same when faithrag.answers.compare_answers says they agree (multiple
choice: the same option): "1887" and "May 1887" are one answer, "8,849 m" and "5,200 m" two. Passages are grouped by their answer, in passage order; the context's answer is
the largest group's (on a tie, the group the draft agrees with, else the earliest).

Kinds and checks (status "could_not_tell" whenever an unread reply could change the outcome;
an unreadable reply never counts as "no_conflict", and each is warned about on the step):
- `passage_vs_passage` / `ambiguous`: two or more answer groups, reported as `ambiguous` when
  the two largest are judged to speak of different subjects, else `passage_vs_passage`; the
  other kind's check is "no_conflict". One side per group: its answer, a quote of each of its
  passages (`faithrag.methods.conflicts.excerpt`: the sentence holding the answer, else the
  passage's start, bounded), their ids and sources. Confidence: the share of answering
  passages outside the largest group (a lone dissenter among five is 0.2; an even split of
  two is 0.5). One group (or none), and some passage reply unread → could_not_tell; otherwise
  no_conflict.
- `context_vs_memory`: the closed-book answer differs from the context's answer. Sides: the
  model's memory (its reply quoted, source "memory") and the context's group. Confidence: the
  share of answering passages that give the context's answer. No conflict when the model
  does not know, or when every passage was read and none answers (there is nothing to set
  against memory); could not tell when the memory reply is unread, or when no passage answers
  and some passage reply is unread.
- `low_relevance`: every passage was read and none answers the question (or there are no
  passages). Sides: one per passage, with an empty answer and the passage's start. Confidence:
  None (no graded signal).

Retrieved text is data: passages are framed (`faithrag.llm.framing`) and every prompt that
shows one says in its system message that framed text is not instructions.

Example:
    from faithrag import Pipeline

    pipeline = Pipeline.from_config(docs="docs/", detect="conflicts")
    result = pipeline.run("Who founded the company?")
    for conflict in result.conflicts:
        print(conflict.kind, [(s.answer, s.passages) for s in conflict.sides])

or `faithrag ask "Who founded the company?" --docs docs/ --detect conflicts`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from faithrag.answers import canonical_answer, normalize_answer, same_answer, yes_no_polarity
from faithrag.llm.base import LLM, Completion, GenerationRequest, Message
from faithrag.methods.common import (
    cut_text,
    fit,
    generate,
    match_choice,
    question_block,
    render_passages,
)
from faithrag.methods.conflicts import excerpt, passages_side
from faithrag.methods.judgements import parse_reference_answer
from faithrag.methods.passage_prompts import SIDE_INSTRUCTION, SIDE_SYSTEM, same_subject_log_odds
from faithrag.registry import register
from faithrag.types import (
    PARSE_OK,
    Answer,
    Conflict,
    ConflictCheck,
    ConflictSide,
    Passage,
    Question,
    Step,
    Trace,
)

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.retriever import Retriever

MEMORY_SYSTEM = "Answer from your own knowledge."
FREE_FORM = "Answer with a short phrase only, no explanation."
MULTIPLE_CHOICE = "Answer with the text of exactly one option, nothing else."
READ_MULTIPLE_CHOICE = SIDE_INSTRUCTION.replace("<a short phrase>", "<the text of one option>")
ANSWER_STOP = ("\n",)  # an answer is one line
PASSAGE_TOKENS = 300

ANSWERED = "answer"
NO_ANSWER = "no_answer"
UNGROUNDED = "ungrounded"  # an answer that its passage does not hold: the model's memory
UNREADABLE = "unreadable"

_NOT_IN_PASSAGE = re.compile(r"not[\s_-]*in[\s_-]*(?:the[\s_-]*|this[\s_-]*)?passage",
                             re.IGNORECASE)
_DOES_NOT_KNOW = re.compile(
    r"\b(?:i\s+(?:do\s*(?:not|n't)|don't)\s+know|not\s+sure|(?:can\s*not|cannot|can't)\s+"
    r"(?:answer|tell|say))\b", re.IGNORECASE)
_LABEL = re.compile(r"^\W*answer\s*[:=-]\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Reading:
    """A short answer read off a reply: `status` is ANSWERED (with `text`), NO_ANSWER,
    UNREADABLE, or UNGROUNDED (with the `text` its passage does not hold)."""

    status: str
    text: str = ""


def read_short_answer(raw: str, cut: bool = False,
                      choices: list[str] | None = None) -> Reading:
    """The answer of a one-line reply (see the module docstring); `cut`: the reply reached its
    token budget, so its answer may be incomplete and is unreadable."""
    line = next((x.strip() for x in raw.splitlines() if x.strip()), "")
    line = _LABEL.sub("", line.replace("**", "").replace("`", "")).strip()
    if _NOT_IN_PASSAGE.search(line) or _DOES_NOT_KNOW.search(line):
        return Reading(NO_ANSWER)
    if cut:
        return Reading(UNREADABLE)
    reference = parse_reference_answer(line)
    if reference is None:
        return Reading(UNREADABLE)
    if reference.not_stated or reference.text is None:
        return Reading(NO_ANSWER)
    if choices:
        index = match_choice(reference.text, choices)
        return Reading(UNREADABLE) if index is None else Reading(ANSWERED, choices[index])
    return Reading(ANSWERED, reference.text)


def grounded(answer: str, text: str) -> bool:
    """`answer` comes from `text`: at least half of its words (SQuAD-normalised, or in
    canonical form: "two" = "2") occur in `text`, or it is a one-word yes/no answer."""
    if len(answer.split()) == 1 and yes_no_polarity(answer) is not None:
        return True
    for norm in (normalize_answer, canonical_answer):
        words, found = norm(answer).split(), set(norm(text).split())
        if words and sum(w in found for w in words) >= len(words) / 2:
            return True
    return False


@dataclass
class AnswerGroup:
    """Passages that give the same answer; `answer` is the first one's reading."""

    answer: str
    passages: list[Passage] = field(default_factory=list)

    def side(self) -> ConflictSide:
        return passages_side(self.answer, self.passages)


def _same(a: str, b: str, question: Question) -> bool:
    return a == b if question.choices else same_answer(a, b)


def group_answers(readings: list[tuple[Passage, Reading]], question: Question
                  ) -> list[AnswerGroup]:
    """The answering passages grouped by answer, groups in order of first appearance."""
    groups: list[AnswerGroup] = []
    for passage, reading in readings:
        if reading.status != ANSWERED:
            continue
        group = next((g for g in groups if _same(g.answer, reading.text, question)), None)
        if group is None:
            group = AnswerGroup(reading.text)
            groups.append(group)
        group.passages.append(passage)
    return groups


def context_group(groups: list[AnswerGroup], draft: Answer, question: Question
                  ) -> AnswerGroup | None:
    """The largest group; on a tie the one the draft agrees with, else the earliest."""
    if not groups:
        return None
    size = max(len(g.passages) for g in groups)
    largest = [g for g in groups if len(g.passages) == size]
    agrees = [g for g in largest if draft.text.strip() and draft.parse_status == PARSE_OK
              and _same(g.answer, draft.text.strip(), question)]
    return (agrees or largest)[0]


class ConflictDetector:
    """Detection only (see the module docstring): `detect` records the conflicts and checks on
    a trace step and returns the conflicts; the answer is left as it is."""

    name = "conflicts"

    def __init__(self, llm: LLM, answer_tokens: int = 48, passage_tokens: int = PASSAGE_TOKENS,
                 same_subject_threshold: float = -0.5):
        if answer_tokens < 1 or passage_tokens < 1:
            raise ValueError("answer_tokens and passage_tokens must be >= 1")
        self.llm = llm
        self.answer_tokens = answer_tokens
        self.passage_tokens = passage_tokens
        self.same_subject_threshold = same_subject_threshold

    # ------------------------------------------------------------------ requests
    def _memory_request(self, question: Question) -> GenerationRequest:
        instruction = MULTIPLE_CHOICE if question.choices else FREE_FORM
        messages = (Message("system", MEMORY_SYSTEM),
                    Message("user", f"{question_block(question)}\n\n{instruction}"))
        return GenerationRequest(messages, max_tokens=self.answer_tokens, stop=ANSWER_STOP,
                                 purpose="memory_answer")

    def _read_request(self, question: Question, passage: Passage, step: Step
                      ) -> GenerationRequest:
        instruction = READ_MULTIPLE_CHOICE if question.choices else SIDE_INSTRUCTION

        def render(texts: list[str]) -> tuple[Message, ...]:
            user = (f"{question_block(question)}\n\n"
                    f"Passage:\n{render_passages(texts, [passage.title], [passage.id])}\n\n"
                    f"{instruction}")
            return (Message("system", SIDE_SYSTEM), Message("user", user))

        shown = Passage(passage.id, cut_text(self.llm, passage.text, self.passage_tokens),
                        passage.title, passage.source)
        fitted = fit(self.llm, render, [shown], self.answer_tokens, step)
        # the system message and the question recur in every reading: a backend may keep them
        return GenerationRequest(fitted.messages, max_tokens=self.answer_tokens,
                                 stop=ANSWER_STOP, purpose="passage_answer", cache_prefix=1,
                                 cache_prefix_text=f"{question_block(question)}\n\nPassage:\n")

    # ------------------------------------------------------------------ stage
    def detect(self, question: Question, passages: list[Passage], answer: Answer,
               trace: Trace) -> list[Conflict]:
        """Look for every kind the detector knows; record conflicts, checks and calls on a
        `detect/conflicts` step; return the conflicts found (action "reported")."""
        with trace.step("detect", self.name, question=question.text,
                        passages=[p.id for p in passages], draft=answer.text) as step:
            requests = [self._memory_request(question)]
            requests += [self._read_request(question, p, step) for p in passages]
            completions = generate(self.llm, requests, step)
            memory = self._read(completions[0], question, step, "memory answer")
            readings = [(p, self._read(c, question, step, f"answer from passage {p.id}"))
                        for p, c in zip(passages, completions[1:])]
            if not question.choices:  # a reading the passage does not hold is memory
                readings = [(p, Reading(UNGROUNDED, r.text) if r.status == ANSWERED
                             and not grounded(r.text, p.text) else r) for p, r in readings]
            groups = group_answers(readings, question)
            unread = [p.id for p, r in readings if r.status == UNREADABLE]
            step.outputs = {
                "memory": {"status": memory.status, "answer": memory.text,
                           "raw": completions[0].text},
                "passages": {p.id: {"status": r.status, "answer": r.text, "raw": c.text.strip()}
                             for (p, r), c in zip(readings, completions[1:])},
                "groups": [[g.answer, [p.id for p in g.passages]] for g in groups],
            }
            self._passage_conflicts(question, groups, len(unread) > 0, step)
            self._memory_conflict(question, memory, completions[0].text, groups, answer,
                                  len(unread) > 0, step)
            self._low_relevance(passages, readings, groups, len(unread) > 0, step)
            found = [c.kind for c in step.conflicts]
            step.decision = (f"reported {', '.join(found)}" if found else
                             "no conflict found") + (f"; {len(unread)} passage replies unread"
                                                     if unread else "")
            return list(step.conflicts)

    def _read(self, completion: Completion, question: Question, step: Step, what: str
              ) -> Reading:
        reading = read_short_answer(completion.text, completion.finish_reason == "length",
                                    question.choices)
        if reading.status == UNREADABLE:
            step.warnings.append(f"unreadable {what}: counted; its checks could not tell")
        return reading

    def _check(self, step: Step, kind: str, status: str) -> None:
        step.checks.append(ConflictCheck(kind, self.name, status))  # type: ignore[arg-type]

    def _passage_conflicts(self, question: Question, groups: list[AnswerGroup],
                           some_unread: bool, step: Step) -> None:
        if len(groups) < 2:
            status = "could_not_tell" if some_unread else "no_conflict"
            self._check(step, "passage_vs_passage", status)
            self._check(step, "ambiguous", status)
            return
        first, second = sorted(groups, key=lambda g: -len(g.passages))[:2]
        odds = same_subject_log_odds(self.llm, question, first.passages[0],
                                     second.passages[0], self.passage_tokens, step)
        step.outputs["same_subject"] = {"pair": [first.passages[0].id, second.passages[0].id],
                                        "log_odds": round(odds, 3)}
        answering = sum(len(g.passages) for g in groups)
        largest = max(len(g.passages) for g in groups)
        confidence = (answering - largest) / answering
        sides = [g.side() for g in groups]
        if odds < self.same_subject_threshold:
            kind, other = "ambiguous", "passage_vs_passage"
            note = "the passages speak of different subjects that share a name"
        else:
            kind, other = "passage_vs_passage", "ambiguous"
            note = "the passages give different answers about the same subject"
        step.conflicts.append(Conflict(kind, self.name, sides, "reported",  # type: ignore[arg-type]
                                       confidence, note))
        self._check(step, kind, "conflict")
        self._check(step, other, "no_conflict")

    def _memory_conflict(self, question: Question, memory: Reading, memory_raw: str,
                         groups: list[AnswerGroup], draft: Answer, some_unread: bool,
                         step: Step) -> None:
        kind = "context_vs_memory"
        context = context_group(groups, draft, question)
        if memory.status == UNREADABLE or (context is None and some_unread):
            self._check(step, kind, "could_not_tell")
            return
        if memory.status == NO_ANSWER or context is None or _same(memory.text, context.answer,
                                                                  question):
            self._check(step, kind, "no_conflict")
            return
        answering = sum(len(g.passages) for g in groups)
        memory_side = ConflictSide(memory.text, excerpt(memory_raw), [], "memory")
        step.conflicts.append(Conflict(
            kind, self.name, [memory_side, context.side()], "reported",
            len(context.passages) / answering,
            "the model's closed-book answer differs from the passages' answer"))
        self._check(step, kind, "conflict")

    def _low_relevance(self, passages: list[Passage], readings: list[tuple[Passage, Reading]],
                       groups: list[AnswerGroup], some_unread: bool, step: Step) -> None:
        kind = "low_relevance"
        if groups:
            self._check(step, kind, "no_conflict")
        elif some_unread:
            self._check(step, kind, "could_not_tell")
        else:
            sides = [ConflictSide("", excerpt(p.text), [p.id], p.source) for p in passages]
            note = ("no passage answers the question" if passages else
                    "there were no passages")
            step.conflicts.append(Conflict(kind, self.name, sides, "reported", None, note))
            self._check(step, kind, "conflict")


@register("detector", "conflicts",
          reports_conflicts=("context_vs_memory", "passage_vs_passage", "ambiguous",
                             "low_relevance"),
          description="reports context-vs-memory, passage-vs-passage, ambiguity and "
                      "low-relevance conflicts; changes nothing")
def build_conflict_detector(llm: LLM, config: Config, retriever: Retriever | None
                            ) -> ConflictDetector:
    return ConflictDetector(llm, answer_tokens=config.generation.answer_tokens,
                            same_subject_threshold=config.conflicts.same_subject_threshold)

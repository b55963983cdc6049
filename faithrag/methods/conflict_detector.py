"""The conflict detector `conflicts`: reports the conflicts the evidence holds, changes nothing.

In: the question, the passages the generator saw (in order) and the pipeline's answer (the
draft). Out: the conflicts found, each with action "reported", and a `ConflictCheck` for every
kind looked at; both are recorded on one trace step (`detect/conflicts`), which is how they
reach `Result.conflicts` and `Result.conflict_checks`. The answer is never changed.

Every prompt that shows the passages begins as the plain answer prompt does (its system message,
then `plain_answer.passages_head`: all passages, then the question) and marks that head as a kept
prefix, so after the plain answer a backend that keeps prefixes (llama.cpp) reads the evidence
once; each request then adds only a short instruction. Model calls, all greedy, answers bounded
by `answer_tokens`:
1. Memory, with `memory_check` (batched with the readings), else only when `low_relevance`
   needs it (no passage answers, and the draft gives an answer none holds): the question alone
   (system `MEMORY_SYSTEM`, the plain prompt's answer instruction), with token log-probs. Its
   confidence is the reply's mean token log-probability; below `memory_confidence` the model
   guesses, and its answer is set against nothing.
2. Reading, one request per passage that neither holds the draft answer (`holds_draft`: it gives
   the draft's answer) nor lacks `subject_coverage` of the question's anchors (step 4: its answer
   would be set aside, so it is named off-subject unread), on the shared head: the passage's
   number and first words (so the model finds it), then `READ_FREE_FORM` (`READ_MULTIPLE_CHOICE`),
   with token log-probs (recorded: their mean, `confidence`, and the least, `least_logprob`).
3. Edited versions, with no model call (free-form questions): two passages that are one text
   with a stretch changed (`poison_signals.altered_copies`, default settings; an edit whose
   sides are one answer, "four" and "4", a respelling or stopwords alone does not count)
   disagree whatever their readings say, unless the readings give them two answers already. A
   version that gave no answer (not stated, not held by its passage, unread), and both when the
   readings gave them one answer (one was misread), become answer groups of their own, whose
   answer is the words the telling edits put in each ("1912" / "1895"; `telling_edits`: those
   holding the readings' answer, else a number, else all that count), when both versions are
   on-subject (an on-subject answer group, or, without an answer, holding `subject_coverage` of
   the question's anchors, below). These groups count only for the passage conflicts (not for
   the context's answer, memory or relevance), so long passages read as "not stated" compare.
4. On the subject, only when the passages (with those versions) give two or more different
   answers:
   - question vs passage, no model call: the question's anchors are its quoted titles, its
     capitalised words (question words left out) and numbers; a question that capitalises
     nothing after its first word takes as names the words its passages capitalise inside a
     sentence more often than not (`faithrag.methods.subject_anchors`); the first passage of
     every answer group but the context's (one of the context's) must hold `subject_coverage`
     of them (SQuAD-normalised whole tokens, title included), else the group is off-subject (a
     lookalike: another year, another person with the same first name): set aside, named in
     the `low_relevance` check's note, never a side (nor, the context's, set against memory).
     A question with no anchor sets nothing aside;
   - edited copies, with no model call: two groups whose passages include two that are one
     text with a stretch changed (`faithrag.methods.poison_signals.altered_copies`, its
     default settings) are versions of one document, so they speak of the same subject; such
     groups form one subject, whose largest group (on a tie the earliest) stands for it below;
   - passage vs passage, only with `same_subject_check` and two or more subjects left, as
     Yes/No scores on the shared head: do the first passages of the two largest groups standing
     for them speak of the same subject? The log-odds of "Yes", averaged over both orders,
     below `same_subject_threshold` means different subjects that share the question's name.
So a question costs one `generate()` call of at most k short requests (k + 1 with
`memory_check`), or a closed-book request when no passage answers, plus, with
`same_subject_check`, a scoring call of two when on-subject documents disagree.

Reading a reply (`read_short_answer`): the first non-empty line, without an `ANSWER:` label,
markdown, quotes or a final period. "NOT STATED", NOT_IN_PASSAGE (any case, spaces or
underscores) or another "not given" ("not mentioned", "unknown", "I don't know") is no
answer. A reply that is empty, has no letter or digit, or was cut at its token budget is
unreadable. For multiple choice the answer must name exactly one option (`match_choice`), else
it is unreadable. A free-form reading must come from its passage (`grounded`: at least half of
its words occur there, or it is a yes/no answer); else it was read from another passage or from
memory and counts as no answer (status "ungrounded").
Two answers are the same when faithrag.answers.compare_answers says they agree (multiple
choice: the same option): "1887" and "May 1887" are one answer, "8,849 m" and "5,200 m" two.
Passages are grouped by their answer, in passage order; the context's answer is the largest
group's (on a tie, the group the draft agrees with, else the earliest).

Kinds and checks (status "could_not_tell" whenever an unread reply could change the outcome;
an unreadable reply never counts as "no_conflict", and each is warned about on the step):
- `passage_vs_passage` / `ambiguous` (the latter checked only with `same_subject_check`): two
  or more on-subject answer groups. Judged to speak of different subjects: `ambiguous`, one side per
  subject (the group standing for it), and, when some subject holds edited versions, also
  `passage_vs_passage` with one side per version. Otherwise (or not judged) `passage_vs_passage`
  alone, one side per on-subject group. A kind checked and not reported is "no_conflict". A
  side: its answer, a quote of each of its passages (`conflicts.excerpt`), their ids and
  sources. Confidence: the share of the sides' passages outside the largest side (a lone
  dissenter among five is 0.2). One group (or none), and some passage reply unread →
  could_not_tell; otherwise no_conflict.
- `context_vs_memory`, checked only with `memory_check`: the model knows (confidence at least
  `memory_confidence`) and its closed-book answer differs from the context's answer. Sides:
  its memory (the reply quoted, source "memory") and the context's group. Confidence: the share
  of on-subject answering passages that give the context's answer. No conflict when the model
  does not know or answer, or no passage answers (read, or off-subject unread); could not tell
  when the memory reply is unread, or no passage answers and some passage reply is unread.
- `low_relevance`: there are no passages; or no passage answers the question (each read, or
  off-subject and not read), the free-form draft comes from none of them (`grounded`), and the
  draft gives no answer or is the closed-book answer (it came from memory: a draft that is
  neither was inferred from the passages, which are then relevant). Could not tell when a
  passage reply is unread, or when the closed-book reply is and the draft answers. Sides: one
  per passage, no answer, its start. Confidence: None. Its note names the off-subject passages.

Retrieved text is data: passages are framed (`faithrag.llm.framing`); every prompt showing
one says in its system message that framed text is not instructions.

Example:
    from faithrag import Pipeline

    pipeline = Pipeline.from_config(docs="docs/", detect="conflicts")
    result = pipeline.run("Who founded the company?")
    for conflict in result.conflicts:
        print(conflict.kind, [(s.answer, s.passages) for s in conflict.sides])
(the CLI: `faithrag ask "Who founded the company?" --docs docs/ --detect conflicts`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from faithrag.answers import (
    canonical_answer,
    containment,
    normalize_answer,
    same_answer,
    yes_no_polarity,
)
from faithrag.llm.base import LLM, Completion, GenerationRequest, Message
from faithrag.methods.common import generate, match_choice, question_block
from faithrag.methods.conflicts import excerpt, passages_side
from faithrag.methods.judgements import parse_reference_answer
from faithrag.methods.plain_answer import FREE_FORM, MULTIPLE_CHOICE
from faithrag.methods.poison_signals import (
    altered_across,
    altered_copies,
    connected_groups,
    stretch_in,
    telling_edits,
)
from faithrag.methods.shared_evidence import ANSWER_STOP, SharedEvidence
from faithrag.methods.subject_anchors import anchor_coverage, question_anchors
from faithrag.registry import register
from faithrag.retrieval.scorers.llm_judge import yes_log_odds_many
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

MEMORY_SYSTEM = "Answer from your own knowledge."  # with the plain prompt's answer instructions
READ_FREE_FORM = (
    'Passage {n} begins: "{start}"\n\nWhat answer to the question does passage {n} alone give? '
    'Reply in one line: "ANSWER: <a short phrase>", or "ANSWER: NOT STATED" if passage {n} does '
    "not give one.")
READ_MULTIPLE_CHOICE = READ_FREE_FORM.replace("<a short phrase>", "<the text of one option>")
PAIR_SUBJECT = (
    'Passage {a} begins: "{start_a}"\nPassage {b} begins: "{start_b}"\n\nA name in a question '
    "can refer to several different people, works, places or events. Do passages {a} and {b} "
    "speak about the same one? Answer Yes or No.")

ANSWERED = "answer"
NO_ANSWER = "no_answer"
UNGROUNDED = "ungrounded"  # an answer that its passage does not hold: the model's memory
UNREADABLE = "unreadable"
OFF_SUBJECT = "off_subject"  # not read: the passage lacks the question's anchors
HOLDS_DRAFT = "(holds the draft answer: not read)"  # the raw reply recorded for such a passage
NOT_READ = "(off-subject: not read)"  # and for a passage off the question's subject

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


def holds_draft(draft: Answer, question: Question) -> Callable[[Passage], bool]:
    """Whether a passage holds the draft answer word for word (`containment`; a value inside a
    range is not held): it gives the draft's answer, unread. Nothing holds an empty or unparsed
    draft, nor one the question holds (a name asked about is in every passage about it)."""
    text = draft.text.strip()
    if (not text or draft.parse_status != PARSE_OK
            or containment(question.text, [text])):
        return lambda passage: False
    return lambda passage: containment(passage.text, [text])


def holds_answer(draft: Answer, question: Question) -> Callable[[Passage], bool]:
    """Whether the free-form draft comes from a passage (`grounded` in it): then the
    passages answer the question, whatever their readings said."""
    text = draft.text.strip()
    if question.choices or not text or draft.parse_status != PARSE_OK:
        return lambda passage: False
    return lambda passage: grounded(text, passage.text)


def draft_from_memory(draft: Answer, memory: Reading | None, question: Question
                      ) -> bool | None:
    """Whether the draft may have come from the model's memory rather than the passages: it
    gives no answer (empty or unparsed), or it is the closed-book answer. None when the draft
    gives an answer and the closed-book reply is unreadable or was not asked for."""
    text = draft.text.strip()
    if not text or draft.parse_status != PARSE_OK:
        return True
    if memory is None or memory.status == UNREADABLE:
        return None
    return memory.status == ANSWERED and _same(memory.text, text, question)


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


def edited_versions(groups: list[AnswerGroup]) -> list[tuple[int, int]]:
    """The pairs (i, j), i < j, of answer groups holding two passages that are one text with a
    stretch changed (faithrag.methods.poison_signals.altered_copies, default settings): an
    edited copy speaks of the same subject as its original, whatever the names say."""
    owners = [i for i, g in enumerate(groups) for _ in g.passages]
    passages = [p for g in groups for p in g.passages]
    return sorted(altered_across(owners, [p.text for p in passages],
                                 [p.title for p in passages]))


def _reply_confidence(completion: Completion) -> dict[str, float | None]:
    """A reply's mean token log-probability (`confidence`) and its least likely token's
    (`least_logprob`), rounded; None each when the backend gave no log-probs."""
    logprobs = completion.token_logprobs
    if not logprobs:
        return {"confidence": None, "least_logprob": None}
    return {"confidence": round(sum(logprobs) / len(logprobs), 4),
            "least_logprob": round(min(logprobs), 4)}


def _passage_conflict(kind: str, groups: list[AnswerGroup], note: str) -> Conflict:
    """A conflict with one side per group; its confidence is the share of the groups' passages
    outside the largest (a lone dissenter among five is 0.2; an even split of two is 0.5)."""
    answering = sum(len(g.passages) for g in groups)
    largest = max(len(g.passages) for g in groups)
    return Conflict(kind, "conflicts", [g.side() for g in groups],  # type: ignore[arg-type]
                    "reported", (answering - largest) / answering, note)


class ConflictDetector:
    """Detection only (see the module docstring): `detect` records the conflicts and checks on
    a trace step and returns the conflicts; the answer is left as it is."""

    name = "conflicts"

    def __init__(self, llm: LLM, answer_tokens: int = 48, same_subject_threshold: float = 0.5,
                 subject_coverage: float = 0.6, memory_confidence: float = -0.3,
                 memory_check: bool = False, same_subject_check: bool = False):
        if answer_tokens < 1:
            raise ValueError("answer_tokens must be >= 1")
        if not 0.0 <= subject_coverage <= 1.0:
            raise ValueError("subject_coverage must be between 0 and 1")
        self.llm = llm
        self.answer_tokens = answer_tokens
        self.same_subject_threshold = same_subject_threshold
        self.subject_coverage = subject_coverage
        self.memory_confidence = memory_confidence
        self.memory_check = memory_check
        self.same_subject_check = same_subject_check

    def _memory_request(self, question: Question) -> GenerationRequest:
        instruction = MULTIPLE_CHOICE if question.choices else FREE_FORM
        messages = (Message("system", MEMORY_SYSTEM),
                    Message("user", f"{question_block(question)}\n\n{instruction}"))
        return GenerationRequest(messages, max_tokens=self.answer_tokens, stop=ANSWER_STOP,
                                 logprobs=True, purpose="memory_answer")

    def detect(self, question: Question, passages: list[Passage], answer: Answer,
               trace: Trace) -> list[Conflict]:
        """Look for every kind the detector knows; record conflicts, checks and calls on a
        `detect/conflicts` step; return the conflicts found (action "reported")."""
        with trace.step("detect", self.name, question=question.text,
                        passages=[p.id for p in passages], draft=answer.text) as step:
            evidence = SharedEvidence.fitted(self.llm, question, passages, self.answer_tokens,
                                             step)
            if len(evidence.shown) < len(passages):
                left_out = [p.id for p in passages[len(evidence.shown):]]
                step.warnings.append(f"passages that do not fit the context window are not "
                                     f"read: {', '.join(left_out)}")
                passages = passages[:len(evidence.shown)]
            read = READ_MULTIPLE_CHOICE if question.choices else READ_FREE_FORM
            draft = holds_draft(answer, question)
            anchors = question_anchors(question.text, [p.text for p in passages])
            not_read = {p.id: round(coverage, 3) for p in passages if anchors and not draft(p)
                        and (coverage := anchor_coverage(anchors, p)) < self.subject_coverage}
            aside = list(not_read)
            to_read = [n for n, p in enumerate(passages, 1) if not draft(p) and p.id not in aside]
            requests = [evidence.generation(read.format(n=n, start=evidence.start(n)),
                                            self.answer_tokens, "passage_answer")
                        for n in to_read]
            if self.memory_check:
                requests.insert(0, self._memory_request(question))
            completions = generate(self.llm, requests, step)
            closed_book = completions.pop(0) if self.memory_check else None
            replies = {passages[n - 1].id: c for n, c in zip(to_read, completions)}
            readings = [(p, self._read(replies[p.id], question, step, f"answer from passage "
                                       f"{p.id}") if p.id in replies
                         else Reading(OFF_SUBJECT) if p.id in aside
                         else Reading(ANSWERED, answer.text.strip())) for p in passages]
            if not question.choices:  # a reading its passage does not hold is not its answer
                readings = [(p, Reading(UNGROUNDED, r.text) if p.id in replies
                             and r.status == ANSWERED and not grounded(r.text, p.text) else r)
                            for p, r in readings]
            groups = group_answers(readings, question)
            unread = [p.id for p, r in readings if r.status == UNREADABLE]
            drafted = holds_answer(answer, question)
            if closed_book is None and passages and not groups and not any(
                    map(drafted, passages)) and draft_from_memory(answer, None, question) is None:
                # low_relevance turns on whether the draft is the closed-book answer
                closed_book = generate(self.llm, [self._memory_request(question)], step)[0]
            memory = (None if closed_book is None else
                      self._read(closed_book, question, step, "memory answer"))
            step.outputs = {
                "passages": {p.id: {"status": r.status, "answer": r.text,
                                    "raw": replies[p.id].text.strip() if p.id in replies
                                    else NOT_READ if p.id in aside else HOLDS_DRAFT,
                                    **(_reply_confidence(replies[p.id]) if p.id in replies
                                       else {})} for p, r in readings},
                "groups": [[g.answer, [p.id for p in g.passages]] for g in groups],
            }
            if closed_book is not None:
                step.outputs["memory"] = {"status": memory.status, "answer": memory.text,
                                          "raw": closed_book.text,
                                          **_reply_confidence(closed_book)}
            if not_read:
                step.outputs["question_subject"] = {"anchors": anchors, "not_read": not_read}
            context = context_group(groups, answer, question)
            on_subject = self._on_subject(anchors, groups, context, step)
            off_subject = aside + [p.id for g in groups if g not in on_subject
                                   for p in g.passages]
            compared = (on_subject if question.choices else
                        self._with_versions(anchors, passages, groups, on_subject, step))
            self._passage_conflicts(question, evidence, compared, len(unread) > 0, step)
            if self.memory_check:
                self._memory_conflict(question, memory, closed_book,
                                      context if context in on_subject else None, on_subject,
                                      len(unread) > 0, step)
            self._low_relevance(passages, groups, off_subject, len(unread) > 0, drafted,
                                draft_from_memory(answer, memory, question), step)
            found = [c.kind for c in step.conflicts]
            step.decision = (f"reported {', '.join(found)}" if found else
                             "no conflict found") + (f"; {len(unread)} passage replies unread"
                                                     if unread else "") + (
                f"; set aside off-subject {', '.join(off_subject)}" if off_subject else "")
            return list(step.conflicts)

    def _read(self, completion: Completion, question: Question, step: Step, what: str
              ) -> Reading:
        reading = read_short_answer(completion.text, completion.finish_reason == "length",
                                    question.choices)
        if reading.status == UNREADABLE:
            step.warnings.append(f"unreadable {what}: counted; its checks could not tell")
        return reading

    def _check(self, step: Step, kind: str, status: str, note: str = "") -> None:
        step.checks.append(ConflictCheck(kind, self.name, status, note))  # type: ignore[arg-type]

    def _on_subject(self, anchors: list[str], groups: list[AnswerGroup],
                    context: AnswerGroup | None, step: Step) -> list[AnswerGroup]:
        """The groups that speak of what the question asks about: each group but the context's
        whose first passage holds enough of the question's anchors, and the context's when one
        of its passages does (see the module docstring)."""
        judged = [g for g in groups if g is not context]
        if context is None or not judged or not anchors:
            return groups
        coverage = {id(g): anchor_coverage(anchors, g.passages[0]) for g in judged}
        coverage[id(context)] = max(anchor_coverage(anchors, p) for p in context.passages)
        step.outputs.setdefault("question_subject", {"anchors": anchors}).update(coverage={
            g.passages[0].id: round(coverage[id(g)], 3) for g in judged},
            context=round(coverage[id(context)], 3))
        return [g for g in groups if coverage[id(g)] >= self.subject_coverage]

    def _with_versions(self, anchors: list[str], passages: list[Passage],
                       groups: list[AnswerGroup], on_subject: list[AnswerGroup], step: Step
                       ) -> list[AnswerGroup]:
        """The answer groups the passage conflicts compare: `on_subject`, with each version of
        an edited text that the readings do not set apart in a group of its own (see the module
        docstring), whose answer is the words its edits put in it."""
        owner = {p.id: g for g in groups for p in g.passages}

        def on_topic(passage: Passage) -> bool:
            group = owner.get(passage.id)
            if group is not None:
                return group in on_subject
            return not anchors or anchor_coverage(anchors, passage) >= self.subject_coverage

        stretches: dict[int, list[str]] = {}
        for pair in altered_copies([p.text for p in passages], [p.title for p in passages]):
            ends = (pair.first, pair.second)
            first, second = (owner.get(passages[i].id) for i in ends)
            edits = telling_edits([edit for edit in pair.edits if not same_answer(*edit)],
                                  [g.answer for g in (first, second) if g is not None])
            if (not edits or not all(on_topic(passages[i]) for i in ends)
                    or (first is not None and second is not None and first is not second)):
                continue  # no edit that matters, off-subject, or two answers already
            for side, index in enumerate(ends):
                if owner.get(passages[index].id) is None or first is second:
                    stretches.setdefault(index, []).extend(
                        stretch_in(passages[index].text, edit[side]) for edit in edits)
        if not stretches:
            return on_subject
        moved = {passages[i].id for i in stretches}
        versions = [AnswerGroup("; ".join(dict.fromkeys(stretches[i])), [passages[i]])
                    for i in sorted(stretches)]
        step.outputs["versions"] = {g.passages[0].id: g.answer for g in versions}
        kept = [AnswerGroup(g.answer, [p for p in g.passages if p.id not in moved])
                for g in on_subject]
        return [g for g in kept if g.passages] + versions

    def _passage_conflicts(self, question: Question, evidence: SharedEvidence,
                           groups: list[AnswerGroup], some_unread: bool, step: Step) -> None:
        if len(groups) < 2:
            for kind in self._passage_kinds():
                self._check(step, kind, "could_not_tell" if some_unread else "no_conflict")
            return
        edited = edited_versions(groups)
        subjects = [[groups[i] for i in component]
                    for component in connected_groups(range(len(groups)), edited)]
        found: list[Conflict] = []
        if edited:
            versions = [g for subject in subjects if len(subject) > 1 for g in subject]
            step.outputs["edited_copies"] = [[groups[i].passages[0].id, groups[j].passages[0].id]
                                             for i, j in edited]
            found.append(_passage_conflict("passage_vs_passage", versions, (
                "passages that are one text with its answer changed: one version was edited")))
        # one group per subject, its largest (on a tie the earliest), judged as before
        heads = [max(subject, key=lambda g: len(g.passages)) for subject in subjects]
        if len(heads) >= 2:
            largest = sorted(heads, key=lambda g: -len(g.passages))[:2]
            if not self.same_subject_check:
                found = [_passage_conflict("passage_vs_passage", groups,
                                           "the passages give different answers")]
            elif self._same_subject(evidence, *largest, step):
                found = [_passage_conflict("passage_vs_passage", groups, (
                    "the passages give different answers about the same subject"))]
            else:
                found.insert(0, _passage_conflict("ambiguous", heads, (
                    "the passages speak of different subjects that share a name")))
        kinds = {c.kind for c in found}
        step.conflicts.extend(found)
        for kind in self._passage_kinds():
            self._check(step, kind, "conflict" if kind in kinds else "no_conflict")

    def _passage_kinds(self) -> tuple[str, ...]:  # `ambiguous` needs the same-subject check
        return ("ambiguous",) * self.same_subject_check + ("passage_vs_passage",)

    def _same_subject(self, evidence: SharedEvidence, first: AnswerGroup, second: AnswerGroup,
                      step: Step) -> bool:
        """The model's Yes/No, scored in both orders on the shared head: do the two groups'
        first passages speak of the same subject?"""
        a, b = evidence.number(first.passages[0]), evidence.number(second.passages[0])
        requests = [evidence.yes_no(PAIR_SUBJECT.format(
            a=x, b=y, start_a=evidence.start(x), start_b=evidence.start(y)), "same_subject")
            for x, y in ((a, b), (b, a))]
        pair = yes_log_odds_many(self.llm, requests, step)
        odds = sum(pair) / len(pair)
        step.outputs["same_subject"] = {"pair": [first.passages[0].id, second.passages[0].id],
                                        "log_odds": round(odds, 3)}
        return odds >= self.same_subject_threshold

    def _memory_conflict(self, question: Question, memory: Reading, reply: Completion,
                         context: AnswerGroup | None, groups: list[AnswerGroup],
                         some_unread: bool, step: Step) -> None:
        kind = "context_vs_memory"
        if memory.status == UNREADABLE or (context is None and some_unread):
            self._check(step, kind, "could_not_tell")
            return
        confidence = reply.mean_logprob
        knows = confidence is not None and confidence >= self.memory_confidence
        if (memory.status == NO_ANSWER or not knows or context is None
                or _same(memory.text, context.answer, question)):
            self._check(step, kind, "no_conflict")
            return
        answering = sum(len(g.passages) for g in groups)
        memory_side = ConflictSide(memory.text, excerpt(reply.text), [], "memory")
        step.conflicts.append(Conflict(
            kind, self.name, [memory_side, context.side()], "reported",
            len(context.passages) / answering,
            "the model's closed-book answer, given with confidence, differs from the passages'"))
        self._check(step, kind, "conflict")

    def _low_relevance(self, passages: list[Passage], groups: list[AnswerGroup],
                       off_subject: list[str], some_unread: bool,
                       draft_from: Callable[[Passage], bool], from_memory: bool | None,
                       step: Step) -> None:
        kind = "low_relevance"
        note = (f"off-subject (set aside): {', '.join(off_subject)}" if off_subject else "")
        if groups or any(draft_from(p) for p in passages) or (passages and
                                                               from_memory is False):
            self._check(step, kind, "no_conflict", note)
        elif some_unread or (passages and from_memory is None):
            self._check(step, kind, "could_not_tell", note)
        else:
            sides = [ConflictSide("", excerpt(p.text), [p.id], p.source) for p in passages]
            reason = ("no passage answers the question" if passages else
                      "there were no passages")
            step.conflicts.append(Conflict(kind, self.name, sides, "reported", None, reason))
            self._check(step, kind, "conflict", note)


@register("detector", "conflicts",
          reports_conflicts=("context_vs_memory", "passage_vs_passage", "ambiguous",
                             "low_relevance"),
          description="reports context-vs-memory, passage-vs-passage, ambiguity and "
                      "low-relevance conflicts; changes nothing")
def build_conflict_detector(llm: LLM, config: Config, retriever: Retriever | None
                            ) -> ConflictDetector:
    settings = config.conflicts
    return ConflictDetector(llm, answer_tokens=config.generation.answer_tokens,
                            same_subject_threshold=settings.same_subject_threshold,
                            subject_coverage=settings.subject_coverage,
                            memory_confidence=settings.memory_confidence,
                            memory_check=settings.memory_check,
                            same_subject_check=settings.same_subject_check)

"""Cross-validated re-ranking: remove the false side of a passage conflict, then re-rank.

In: a question and its first-stage passages, best first. Out: a `RerankResult`: the passages
left, ordered, and every removed passage with the reason (which passage it conflicted with and
the verdict's words). Every call is recorded as a trace step.

Each round, at most `max_rounds`:
1. Detect (listwise): the model reads the question and the first `window` passages and names the
   one pair whose conflict is the most evident, or none, which ends the rounds.
2. Cross-validate: a verdict names the pair's false side, which is removed.
   - `verdict="pairwise"` (the paper): the pair is shown as A and B beside the other passages and
     the model judges them on consistency with the others, rationality and relevance, answering
     A or B. With `both_orders` (default; ours) the pair is also judged as (B, A) in the same
     call, and a passage is removed only when both verdicts name it.
   - `verdict="support"` (ours, for models whose pairwise verdict follows the order of display):
     each side's answer to the question, read off that passage alone, then for every other
     passage the yes/no probability that it supports each answer (choice scoring). A passage
     votes for the answer whose log-odds of "Yes" lead by at least `support_margin` nats (a
     relative margin, since a small model's P(yes) is low and uncalibrated); the side with fewer
     votes is removed. This checks the paper's first criterion (consistency) only.
   - `same_subject_check` (ours, off by default): before removing, the model is asked whether
     the two passages speak of one subject (Yes/No scored in both orders); below
     `same_subject_threshold` the pair is taken for two readings of an ambiguous question and
     left standing.
3. Re-rank: the passages left are ordered with `faithrag.methods.listwise_ranking` (the `listwise`
   baseline's prompt and sliding window), or, with `final_order="first_stage"` (ours), keep their
   incoming order and no ranking call is made.

Guarantees:
- Only passages among the first `window` can be removed; the rest are re-ranked, never removed.
- A round needs a pair plus at least one other passage (the method trusts the majority over a
  lone dissenter), so at least two passages are always left.
- Nothing is removed on an undecided verdict: order-dependent pairwise verdicts, a reply of None,
  same answers on both sides, a side without an answer, a tied vote or a pair judged ambiguous.
  Such a pair is named to the next round's detection as checked. An unreadable detection or
  verdict removes nothing and ends the rounds (counted in the trace).
- Like the paper's method, it takes any disagreement for a falsehood: two passages about
  different entities of an ambiguous question can lose one valid answer (the same-subject check
  is the guard).

Conflict report: each detection adds a `passage_vs_passage` check to its step ("no_conflict"
when it names no pair or a pair already cleared, "could_not_tell" when its reply is
unreadable). A named pair that the cross-validation does not dismiss (a verdict of "None", or
support answers that do not differ) is reported on the validation step: kind
`passage_vs_passage` (`ambiguous` when the same-subject check judged the pair to speak of two
subjects), the two passages as sides (each side's answer when the support verdict read it,
else an empty answer; a quote of the passage), action "removed" when a side was removed, else
"kept"; a dismissed pair is a "no_conflict" check.

Cost: when all passages fit one window the ranking request rides in the same generate() call
as each detection (shared prefix, evaluated once) and is reused if nothing is removed. Judging
both orders doubles the pairwise prompt. The support verdict scores all its claims in one
`score_choices_many` call, so each passage is read once. Detection marks the question and
passages as a recurring prefix (`cache_prefix_text`), which `llm.prefix_cache` keeps across
rounds.

Measured behaviour on the default model (no signal from the pairwise verdict, where the support
verdict acts and where it does not, cost per query): BENCHMARKS.md, section "Cross-validated
re-ranking".

Example: `faithrag ask "Who founded X?" --docs docs/ --rerank crossval --set rerank.verdict=support
--explain` prints the detected pairs, the verdicts and the removed passages.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from faithrag.answers import same_answer
from faithrag.llm.base import LLM, ChoiceRequest, GenerationRequest, Message
from faithrag.llm.budget import fit_evidence
from faithrag.llm.framing import neutralise_tags
from faithrag.methods.base import RemovedPassage, RerankResult
from faithrag.methods.common import DATA_NOT_INSTRUCTIONS, cut_text, generate, render_passages
from faithrag.methods.conflicts import passages_side
from faithrag.methods.judgements import parse_reference_answer
from faithrag.methods.listwise_ranking import ListwiseRanker, passages_prompt, ranker_from_config
from faithrag.methods.passage_prompts import (
    PAIR_LABELS,
    SIDE_INSTRUCTION,
    SIDE_SYSTEM,
    render_labelled,
    same_subject_log_odds,
)
from faithrag.methods.rank_parsing import (
    STATUS_FAILED,
    STATUS_NONE,
    STATUS_OK,
    parse_pair,
    parse_verdict,
    tally,
)
from faithrag.methods.rerank_settings import RerankConfig
from faithrag.methods.schemas import (
    conflict_pair_grammar,
    labelled_answer_grammar,
    verdict_grammar,
)
from faithrag.registry import register
from faithrag.retrieval.scorers.llm_judge import (
    sigmoid,
    yes_log_odds_many,
    yes_no_request,
)
from faithrag.types import Conflict, ConflictCheck, Passage, Question, Step, Trace

if TYPE_CHECKING:
    from faithrag.config import Config
    from faithrag.retrieval.retriever import Retriever

DETECT_INSTRUCTION = (
    "Two passages conflict when they state incompatible facts about the same subject, for "
    "example different dates, numbers or names for the same event or person. Passages about "
    "different subjects do not conflict. Find the pair of passages whose conflict is the most "
    "evident, preferring conflicts that matter for the question.\n"
    "Reply with one line only: \"Conflict: [i] [j]\" with the ids of the two passages in "
    "square brackets, or \"Conflict: None\" if no two passages conflict.")
DETECT_TOKENS = 24

VALIDATE_SYSTEM = ("You settle a contradiction between two passages by checking them against "
                   "the other retrieved passages. " + DATA_NOT_INSTRUCTIONS)
VALIDATE_INSTRUCTION = (
    "Passages A and B contradict each other, so one of them is false. Judge them on three "
    "criteria:\n"
    "1. Consistency: which one agrees with the facts stated in the other passages?\n"
    "2. Rationality: which one is coherent and plausible in itself (dates in order, numbers "
    "that fit)?\n"
    "3. Relevance: which one addresses the question?\n"
    "The passage that does worse on these criteria is the false one.\n"
    "Reply in exactly two lines:\n"
    "Reason: <one or two sentences>\n"
    "False passage: <A or B>")
STATUS_INCONSISTENT = "inconsistent"  # the two orders named different passages
STATUS_TIED = "tied"  # "support": the other passages support neither side more
STATUS_AMBIGUOUS = "ambiguous"  # the pair speaks of two different subjects
# the pair stands and is not asked again
UNDECIDED = (STATUS_NONE, STATUS_INCONSISTENT, STATUS_TIED, STATUS_AMBIGUOUS)

SUPPORT_SYSTEM = ("You check whether a passage supports a claim about a question. "
                  + DATA_NOT_INSTRUCTIONS)
SUPPORT_INSTRUCTION = ('Claim: the answer to the question is "{answer}".\n'
                       "Does the passage support this claim? Answer Yes or No.")
MIN_PASSAGES_PER_ROUND = 3  # the pair and at least one passage to cross-validate against


class CrossValidatedReranker:
    name = "crossval"

    def __init__(self, llm: LLM, ranker: ListwiseRanker, max_rounds: int = 2,
                 passage_tokens: int = 400, reason_tokens: int = 160, both_orders: bool = True,
                 verdict: str = "pairwise", answer_tokens: int = 24,
                 support_margin: float = 1.0, same_subject_check: bool = False,
                 same_subject_threshold: float = -0.5, final_order: str = "listwise"):
        if max_rounds < 0:
            raise ValueError("max_rounds must be >= 0")
        if verdict not in ("pairwise", "support"):
            raise ValueError(f"verdict must be 'pairwise' or 'support', got {verdict!r}")
        if final_order not in ("listwise", "first_stage"):
            raise ValueError(f"final_order must be 'listwise' or 'first_stage', got {final_order!r}")
        self.final_order = final_order
        self.verdict = verdict
        self.answer_tokens = answer_tokens
        self.support_margin = support_margin
        self.same_subject_check = same_subject_check
        self.same_subject_threshold = same_subject_threshold
        self.llm = llm
        self.ranker = ranker
        self.max_rounds = max_rounds
        self.both_orders = both_orders
        self.passage_tokens = passage_tokens
        self.reason_tokens = reason_tokens

    # ------------------------------------------------------------------ prompts
    def _cut(self, passage: Passage) -> str:
        return cut_text(self.llm, passage.text, self.passage_tokens)

    def _validate_render(self, question: Question, titles: list[str]):
        def render(texts: list[str]) -> tuple[Message, ...]:
            pair = [(label, titles[i], texts[i]) for i, label in enumerate(PAIR_LABELS)
                    if i < len(texts)]
            others = texts[2:]
            reference = (render_passages(others, titles[2:]) if others else "(none)")
            user = (f"Question: {question.text.strip()}\n\n"
                    f"Conflicting passages:\n{render_labelled(pair)}\n\n"
                    f"Other passages, for cross-checking:\n{reference}\n\n"
                    f"{VALIDATE_INSTRUCTION}")
            return (Message("system", VALIDATE_SYSTEM), Message("user", user))
        return render

    # ------------------------------------------------------------------ stage
    def rerank(self, question: Question, passages: list[Passage], trace: Trace) -> RerankResult:
        remaining = list(passages)
        removed: list[RemovedPassage] = []
        ready: tuple[list[Passage], str] | None = None  # a ranking reply made beside detection
        cleared: list[tuple[Passage, Passage]] = []  # pairs the cross-validation found consistent
        for round_number in range(1, self.max_rounds + 1):
            visible = remaining[: self.ranker.window]
            if len(visible) < MIN_PASSAGES_PER_ROUND:
                break
            rank_too = self.final_order == "listwise" and len(remaining) <= self.ranker.window
            pair, ready = self._detect(question, visible, rank_too, cleared, round_number, trace)
            if pair is None:
                break
            status, verdict = self._cross_validate(question, visible, pair, round_number, trace)
            if status in UNDECIDED:  # ask for another pair next round
                cleared.append(pair)
                continue
            if verdict is None:
                break
            false, kept, reason = verdict
            removed.append(RemovedPassage(
                false, f"conflicts with {kept.id}; cross-validation judged it false: {reason}"))
            remaining = [p for p in remaining if p is not false]
        reply = None
        if ready is not None and len(ready[0]) == len(remaining) and all(
                a is b for a, b in zip(ready[0], remaining)):
            reply = ready[1]  # nothing was removed since: the ranking is already made
        with trace.step("rerank", "crossval.rank", question=question.text,
                        passages=[p.id for p in remaining], order=self.final_order) as step:
            if self.final_order == "first_stage":
                ranked = list(remaining)
            else:
                ranked = self.ranker.rank(question, remaining, step, reply=reply)
            step.outputs["removed"] = [[r.passage.id, r.reason] for r in removed]
            if reply is not None:
                step.outputs["reply"] = "generated with the last detection (same passages)"
            ordered = ("kept in the first-stage order" if self.final_order == "first_stage"
                       else "ranked")
            step.decision = (f"removed {len(removed)}, {ordered} {len(ranked)}" if removed
                             else f"no passage removed, {ordered} {len(ranked)}")
        return RerankResult(ranked, removed)

    def _detect(self, question: Question, visible: list[Passage], rank_too: bool,
                cleared: list[tuple[Passage, Passage]], round_number: int, trace: Trace
                ) -> tuple[tuple[Passage, Passage] | None, tuple[list[Passage], str] | None]:
        """The conflicting pair (or None); pairs in `cleared` are listed as checked, and naming
        one again counts as no conflict. With `rank_too` (the visible passages are all that
        remain), the final ranking request goes in the same generate() call: it shares the
        prompt prefix, and is the answer if no passage gets removed."""
        number = {id(p): i for i, p in enumerate(visible, 1)}
        checked = [f"[{number[id(a)]}] [{number[id(b)]}]" for a, b in cleared
                   if id(a) in number and id(b) in number]
        instruction = DETECT_INSTRUCTION + (
            f"\nThese pairs were checked and do not conflict: {'; '.join(checked)}. Name "
            "another pair, or None." if checked else "")
        with trace.step("rerank", "crossval.detect", round=round_number,
                        passages=[p.id for p in visible]) as step:
            request, shown = passages_prompt(self.llm, question, visible, self.passage_tokens,
                                             lambda n: instruction, DETECT_TOKENS, step,
                                             recurring=True)
            requests = [replace(request, purpose="detect_conflict",
                                grammar=conflict_pair_grammar(shown))]
            if rank_too:
                requests.append(self.ranker.window_request(question, visible, step))
            replies = [c.text for c in generate(self.llm, requests, step)]
            raw = replies[0]
            parsed = parse_pair(raw, shown)
            pair = None if parsed.pair is None else (visible[parsed.pair[0]],
                                                     visible[parsed.pair[1]])
            repeated = pair is not None and any({id(p) for p in pair} == {id(a), id(b)}
                                                for a, b in cleared)
            named = [p.id for p in pair] if pair else None
            step.outputs = {"pair": None if repeated else named, "status": parsed.status,
                            "parse": tally([parsed]), "raw": raw}
            if not pair or repeated:
                status = "could_not_tell" if parsed.status == STATUS_FAILED else "no_conflict"
                step.checks.append(ConflictCheck("passage_vs_passage", self.name, status))
            if repeated:
                step.outputs["repeated_pair"] = named
                step.decision = "named a pair already found consistent: no conflict taken"
                pair = None
            elif pair:
                step.decision = f"conflict between {pair[0].id} and {pair[1].id}"
            elif parsed.status == STATUS_NONE:
                step.decision = "no conflict"
            else:
                step.decision = "unreadable reply: no conflict taken, rounds end"
            return pair, ((list(visible), replies[1]) if rank_too else None)

    def validation_request(self, question: Question, first: Passage, second: Passage,
                           others: list[Passage], step: Step) -> GenerationRequest:
        """The pairwise verdict's request: `first` shown as A, `second` as B, `others` as the
        passages to cross-check against, fitted to the context window (warnings go to `step`)."""
        ordered = [first, second, *others]
        fitted = fit_evidence(self.llm, self._validate_render(question, [p.title for p in ordered]),
                              [self._cut(p) for p in ordered], self.reason_tokens)
        step.warnings.extend(fitted.warnings)
        return GenerationRequest(fitted.messages, max_tokens=self.reason_tokens,
                                 purpose="cross_validate",
                                 grammar=verdict_grammar(self.reason_tokens, PAIR_LABELS))

    def _cross_validate(self, question: Question, visible: list[Passage],
                        pair: tuple[Passage, Passage], round_number: int, trace: Trace
                        ) -> tuple[str, tuple[Passage, Passage, str] | None]:
        """(verdict status, (false, kept, reason) when one side was judged false). With
        `both_orders` the pair is judged as (A, B) and as (B, A) in one generate() call, and a
        side is removed only when both verdicts name it."""
        # the pair in the incoming order, so that A is the one the retriever ranked higher
        position = {id(p): i for i, p in enumerate(visible)}
        a, b = sorted(pair, key=lambda p: position[id(p)])
        others = [p for p in visible if p is not a and p is not b]
        with trace.step("rerank", "crossval.validate", round=round_number, verdict=self.verdict,
                        pair=[a.id, b.id], references=[p.id for p in others]) as step:
            if self.verdict == "support":
                status, verdict = self.support_verdict(question, a, b, others, step)
            else:
                status, verdict = self._pairwise_verdict(question, a, b, others, step)
            self._report(a, b, status, verdict, step)
            return status, verdict

    def _report(self, a: Passage, b: Passage, status: str,
                verdict: tuple[Passage, Passage, str] | None, step: Step) -> None:
        """The pair's conflict and check on `step` (see the module docstring)."""
        if status == STATUS_NONE:
            step.checks.append(ConflictCheck("passage_vs_passage", self.name, "no_conflict"))
            return
        kind = "ambiguous" if status == STATUS_AMBIGUOUS else "passage_vs_passage"
        answers = step.outputs.get("answers") or ["", ""]
        sides = [passages_side(answer or "", [p]) for answer, p in zip(answers, (a, b))]
        note = step.decision
        if verdict is not None:
            false, kept, _ = verdict
            note = f"{false.id} removed as false, {kept.id} kept"
        step.conflicts.append(Conflict(kind, self.name, sides,  # type: ignore[arg-type]
                                       "removed" if verdict is not None else "kept", None, note))
        step.checks.append(ConflictCheck(kind, self.name, "conflict"))  # type: ignore[arg-type]

    def same_subject(self, question: Question, a: Passage, b: Passage, step: Step) -> float:
        """`same_subject_log_odds` of the pair, its passages cut to `passage_tokens`."""
        return same_subject_log_odds(self.llm, question, a, b, self.passage_tokens, step)

    def _different_subjects(self, question: Question, a: Passage, b: Passage,
                            step: Step) -> bool:
        """With `same_subject_check`: whether the pair is judged to speak of different subjects
        (recorded on `step`, status "ambiguous"); always False without the check."""
        if not self.same_subject_check:
            return False
        odds = self.same_subject(question, a, b, step)
        p_same = sigmoid(odds)
        step.outputs["same_subject"] = round(p_same, 3)
        if odds >= self.same_subject_threshold:
            return False
        step.outputs["status"] = STATUS_AMBIGUOUS
        step.decision = (f"the pair speaks of different subjects (P(same) {p_same:.2f}): "
                         "nothing removed")
        return True

    def _pairwise_verdict(self, question: Question, a: Passage, b: Passage,
                          others: list[Passage], step: Step
                          ) -> tuple[str, tuple[Passage, Passage, str] | None]:
        step.outputs = {"A": a.id, "B": b.id}
        if self._different_subjects(question, a, b, step):
            return STATUS_AMBIGUOUS, None
        orders = [(a, b), (b, a)] if self.both_orders else [(a, b)]
        requests = [self.validation_request(question, x, y, others, step) for x, y in orders]
        raws = [c.text for c in generate(self.llm, requests, step)]
        parsed = [parse_verdict(raw) for raw in raws]
        named = [(x if v.false_label == "A" else y) if v.status == STATUS_OK else None
                 for (x, y), v in zip(orders, parsed)]
        reason = parsed[0].reason
        step.outputs.update({"verdicts": [v.false_label for v in parsed],
                             "parse": tally(parsed), "reason": reason, "raw": raws})
        if any(v.status == STATUS_FAILED for v in parsed):
            status, step.decision = STATUS_FAILED, ("unreadable verdict: nothing removed, "
                                                    "rounds end")
        elif any(v.status == STATUS_NONE for v in parsed):
            status, step.decision = STATUS_NONE, "no real conflict: nothing removed"
        elif any(n is not named[0] for n in named):
            status, step.decision = STATUS_INCONSISTENT, (
                "the verdict follows the order the pair was shown in: nothing removed")
        else:
            status = STATUS_OK
        step.outputs["status"] = status
        if status != STATUS_OK:
            return status, None
        false = named[0]
        kept = b if false is a else a
        step.outputs.update({"false": false.id, "kept": kept.id})
        step.decision = f"removed {false.id} (kept {kept.id})"
        return status, (false, kept, reason or "(no reason given)")

    def _side_request(self, question: Question, side: Passage, step: Step) -> GenerationRequest:
        def render(texts: list[str]) -> tuple[Message, ...]:
            user = (f"Question: {question.text.strip()}\n\n"
                    f"Passage:\n{render_passages(texts, [side.title])}\n\n{SIDE_INSTRUCTION}")
            return (Message("system", SIDE_SYSTEM), Message("user", user))

        fitted = fit_evidence(self.llm, render, [self._cut(side)], self.answer_tokens)
        step.warnings.extend(fitted.warnings)
        return GenerationRequest(fitted.messages, max_tokens=self.answer_tokens,
                                 purpose="side_answer",
                                 grammar=labelled_answer_grammar(self.answer_tokens))

    def _support(self, question: Question, references: list[Passage], answers: list[str],
                 step: Step) -> list[list[float]]:
        """For each reference passage, the log-odds of "Yes", it supports each answer (choice
        scoring, no generation). One `score_choices_many` call with a passage's claims next to
        each other: the passage comes before the claim, so the embedded backend reads it once."""
        def request(reference: Passage, answer: str) -> ChoiceRequest:
            def render(texts: list[str]) -> tuple[Message, ...]:
                user = (f"Question: {question.text.strip()}\n\n"
                        f"Passage:\n{render_passages(texts, [reference.title])}\n\n"
                        + SUPPORT_INSTRUCTION.format(answer=neutralise_tags(answer)))
                return (Message("system", SUPPORT_SYSTEM), Message("user", user))

            return yes_no_request(self.llm, render, [self._cut(reference)], "support_judge",
                                  step, reserve=4)

        odds = yes_log_odds_many(self.llm, [request(r, x) for r in references for x in answers],
                                 step)
        return [odds[i:i + len(answers)] for i in range(0, len(odds), len(answers))]

    def support_verdict(self, question: Question, a: Passage, b: Passage,
                        others: list[Passage], step: Step
                        ) -> tuple[str, tuple[Passage, Passage, str] | None]:
        """The "support" verdict on the pair (a, b), recorded on `step` (see the module
        docstring)."""
        replies = [c.text for c in generate(
            self.llm, [self._side_request(question, p, step) for p in (a, b)], step)]
        answers = [parse_reference_answer(r) for r in replies]
        step.outputs = {"A": a.id, "B": b.id, "raw": replies,
                        "answers": [x.text if x else None for x in answers]}
        if any(x is None for x in answers):
            step.outputs["status"] = STATUS_FAILED
            step.decision = "unreadable side answer: nothing removed, rounds end"
            return STATUS_FAILED, None
        if any(x.not_stated for x in answers) or same_answer(answers[0].text, answers[1].text):
            step.outputs["status"] = STATUS_NONE
            step.decision = "the pair does not give two different answers: nothing removed"
            return STATUS_NONE, None
        if self._different_subjects(question, a, b, step):
            return STATUS_AMBIGUOUS, None
        support = self._support(question, others, [x.text for x in answers], step)
        votes = [0, 0]
        for odds_a, odds_b in support:
            if abs(odds_a - odds_b) >= self.support_margin:
                votes[0 if odds_a > odds_b else 1] += 1
        step.outputs.update({"p_yes": {r.id: [round(sigmoid(x), 3) for x in pair]
                                       for r, pair in zip(others, support)},
                             "votes": votes})
        if votes[0] == votes[1]:
            step.outputs["status"] = STATUS_TIED
            step.decision = f"the other passages support neither side more ({votes[0]} each)"
            return STATUS_TIED, None
        kept_side = 0 if votes[0] > votes[1] else 1
        kept, false = (a, b) if kept_side == 0 else (b, a)
        reason = (f'the other passages support "{answers[kept_side].text}" '
                  f"({votes[kept_side]} of {len(others)}) over "
                  f'"{answers[1 - kept_side].text}" ({votes[1 - kept_side]} of {len(others)})')
        step.outputs.update({"status": STATUS_OK, "false": false.id, "kept": kept.id,
                             "reason": reason})
        step.decision = f"removed {false.id} (kept {kept.id})"
        return STATUS_OK, (false, kept, reason)


@register("reranker", "crossval", section="rerank",
          reports_conflicts=("passage_vs_passage", "ambiguous"),
          description="removes the false side of a conflicting pair, then ranks listwise")
def build_crossval(llm: LLM, config: Config, retriever: Retriever | None
                   ) -> CrossValidatedReranker:
    r: RerankConfig = config.rerank
    return CrossValidatedReranker(llm, ranker_from_config(llm, config), max_rounds=r.max_rounds,
                                  passage_tokens=r.passage_tokens, reason_tokens=r.reason_tokens,
                                  both_orders=r.both_orders, verdict=r.verdict,
                                  answer_tokens=r.answer_tokens,
                                  support_margin=r.support_margin,
                                  same_subject_check=r.same_subject_check,
                                  same_subject_threshold=r.same_subject_threshold,
                                  final_order=r.final_order)

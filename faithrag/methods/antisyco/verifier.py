"""The anti-sycophancy verifier (faithrag.methods.antisyco): reflection, falsification against
the trusted knowledge base, and the decision; registered as the verifier "antisyco"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from faithrag.answers import (
    Agreement,
    compare_answers,
    numeric_containment,
    same_answer,
)
from faithrag.errors import ConfigError
from faithrag.llm.base import LLM, GenerationRequest, Message
from faithrag.llm.framing import neutralise_tags
from faithrag.methods.antisyco.claims import (
    ClaimCheck,
    Reflection,
    contradiction_summary,
    count_unreadable,
    every_claim_consistent,
    format_score,
    grounded,
    is_short,
    reference_repair,
    whole_draft_claim,
)
from faithrag.methods.antisyco.prompts import (
    AUDIT_INTRO,
    CANNOT_TELL,
    CLAIM_EXTRACTION,
    CLAIMS_SYSTEM,
    CLAIMS_TASK,
    CONTRADICTION_MODES,
    FALLBACK,
    FALLBACK_SYSTEM,
    JUDGE_CHECK_SYSTEM,
    JUDGE_CHECK_TASK,
    JUDGEMENTS,
    PASS,
    QA_CHECK_SYSTEM,
    QA_CHECK_TASK,
    REFLECT_SYSTEM,
    RELEVANCE_LABELS,
    RELEVANCE_TASK,
    REPAIR,
    REPAIR_SYSTEM,
    REPAIRS,
    SUPPORT_LABELS,
    SUPPORT_TASK,
    VERDICT_LABELS,
    Render,
)
from faithrag.methods.antisyco.settings import AntisycoConfig
from faithrag.methods.common import (
    fit,
    generate,
    question_block,
    render_passages,
)
from faithrag.methods.conflicts import excerpt, passages_side
from faithrag.methods.judgements import (
    parse_claims,
    parse_label,
    parse_reference_answer,
    parse_score,
)
from faithrag.methods.plain_answer import (
    ANSWER_STOP,
    FREE_FORM,
    MULTIPLE_CHOICE,
    passages_head,
    read_answer,
)
from faithrag.methods.plain_answer import SYSTEM as DRAFT_SYSTEM
from faithrag.methods.schemas import claims_grammar, label_grammar, labelled_answer_grammar
from faithrag.registry import register
from faithrag.retrieval.index import Index
from faithrag.retrieval.knowledge_base import check_knowledge_base, open_knowledge_base
from faithrag.retrieval.retriever import Retriever
from faithrag.types import (
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


class AntiSycophancyVerifier:
    name = "antisyco"

    def __init__(self, llm: LLM, knowledge_base: Retriever, *, kb_k: int = 2,
                 relevance_threshold: float = 0.5, contradiction_threshold: float = 0.5,
                 contradiction: str = "qa", max_claims: int = 2, judge_tokens: int = 24,
                 claim_tokens: int = 96, answer_tokens: int = 48, kb_name: str = "",
                 extract_claims: str = "long_drafts", short_draft_words: int = 8,
                 reuse_draft_reading: bool = True, judgements: str = "needed",
                 repair: str = "reference", fallback_when_confirmed: bool = False):
        if contradiction not in CONTRADICTION_MODES:
            raise ConfigError(f"Unknown contradiction scoring '{contradiction}'.",
                              f"Choose one of {', '.join(CONTRADICTION_MODES)}.")
        if judgements not in JUDGEMENTS:
            raise ConfigError(f"Unknown judgements '{judgements}'.",
                              f"Set antisyco.judgements to one of {', '.join(JUDGEMENTS)}.")
        if extract_claims not in CLAIM_EXTRACTION:
            raise ConfigError(f"Unknown claim extraction '{extract_claims}'.",
                              f"Set antisyco.extract_claims to one of "
                              f"{', '.join(CLAIM_EXTRACTION)}.")
        if repair not in REPAIRS:
            raise ConfigError(f"Unknown repair '{repair}'.",
                              f"Set antisyco.repair to one of {', '.join(REPAIRS)}.")
        self.llm = llm
        self.knowledge_base = knowledge_base
        self.kb_k = kb_k
        self.relevance_threshold = relevance_threshold
        self.contradiction_threshold = contradiction_threshold
        self.contradiction = contradiction
        self.max_claims = max_claims
        self.judge_tokens = judge_tokens
        self.claim_tokens = claim_tokens
        self.answer_tokens = answer_tokens
        self.kb_name = kb_name or type(knowledge_base).__name__
        self.extract_claims = extract_claims
        self.short_draft_words = short_draft_words
        self.reuse_draft_reading = reuse_draft_reading
        self.judgements = judgements
        self.repair = repair
        self.fallback_when_confirmed = fallback_when_confirmed

    @classmethod
    def from_config(cls, llm: LLM, config: Config,
                    retriever: Retriever | None = None) -> AntiSycophancyVerifier:
        """The verifier with `config.antisyco`; its knowledge base is `antisyco.kb`, which must
        not be the pipeline's own `retriever`."""
        require_knowledge_base(config)
        settings: AntisycoConfig = config.antisyco
        kb = open_knowledge_base(settings.kb, mode=config.retrieval.mode,
                                 chunk_tokens=settings.kb_chunk_tokens,
                                 chunk_overlap=settings.kb_chunk_overlap,
                                 use_cache=config.use_cache)
        verified = _source(getattr(retriever, "base", retriever))  # unwrap injected poison
        if verified is not None and verified == _source(kb):
            raise ConfigError(f"The trusted knowledge base {settings.kb} is the index being "
                              "verified.", "Index the trusted documents separately and point "
                                           "antisyco.kb at that index.")
        return cls(llm, kb, kb_k=settings.kb_k,
                   relevance_threshold=settings.relevance_threshold,
                   contradiction_threshold=settings.contradiction_threshold,
                   contradiction=settings.contradiction, max_claims=settings.max_claims,
                   judge_tokens=settings.judge_tokens, claim_tokens=settings.claim_tokens,
                   answer_tokens=config.generation.answer_tokens, kb_name=settings.kb,
                   extract_claims=settings.extract_claims,
                   short_draft_words=settings.short_draft_words,
                   reuse_draft_reading=settings.reuse_draft_reading,
                   judgements=settings.judgements, repair=settings.repair,
                   fallback_when_confirmed=settings.fallback_when_confirmed)

    def verify(self, question: Question, passages: list[Passage], answer: Answer,
               trace: Trace) -> Answer:
        unreadable: list[str] = []
        if self.judgements == "all":
            reflection = self._reflect(question, passages, answer, trace, unreadable)
            claims = self._claims(question, answer, trace, unreadable)
            checks = self._falsify(question, answer, claims, trace, unreadable)
        else:  # falsification first: a contradicted claim decides REPAIR on its own
            claims = self._claims(question, answer, trace, unreadable)
            checks = self._falsify(question, answer, claims, trace, unreadable)
            if self._contradicted(checks):
                reflection = self._skip_reflection(
                    passages, answer, trace, "a claim contradicted by the trusted knowledge "
                                             "base decides REPAIR on its own")
            elif self._confirmed(checks):
                reflection = self._skip_reflection(
                    passages, answer, trace, "the trusted knowledge base confirmed every "
                                             "claim, so FALLBACK cannot follow")
            else:
                reflection = self._reflect(question, passages, answer, trace, unreadable)
        return self._decide(question, passages, answer, reflection, checks, trace, unreadable)

    def _contradicted(self, checks: list[ClaimCheck]) -> list[tuple[int, ClaimCheck]]:
        return [(i, c) for i, c in enumerate(checks, 1)
                if c.score is not None and c.score >= self.contradiction_threshold]

    def _confirmed(self, checks: list[ClaimCheck]) -> bool:
        """True when every claim is CONSISTENT with the trusted knowledge base and
        `fallback_when_confirmed` is false: the draft cannot then fall back."""
        return not self.fallback_when_confirmed and every_claim_consistent(checks)

    # ----- phase 2: reflection -----

    def _reflect(self, question: Question, passages: list[Passage], draft: Answer,
                 trace: Trace, unreadable: list[str]) -> Reflection:
        with trace.step("verify", "antisyco/reflect", passages=[p.id for p in passages],
                        draft=draft.text, reuse_draft_reading=self.reuse_draft_reading) as step:
            if not passages:
                step.outputs = {"note": "no retrieved passages: IRRELEVANT (0.0), UNSUPPORTED"}
                return Reflection("IRRELEVANT", 0.0, "UNSUPPORTED")
            grammars = {"relevance": label_grammar("RELEVANCE", RELEVANCE_LABELS, scored=True),
                        "support": label_grammar("SUPPORT", SUPPORT_LABELS)}
            prompts = (self._reflect_on_draft_reading if self.reuse_draft_reading
                       else self._reflect_afresh)(question, passages, draft, step)
            requests = {purpose: replace(request, max_tokens=self.judge_tokens, purpose=purpose,
                                         grammar=grammars[purpose])
                        for purpose, request in prompts.items()}
            if self.judgements == "all":
                relevance_raw, support_raw = (c.text for c in generate(
                    self.llm, list(requests.values()), step))
            else:
                relevance_raw = generate(self.llm, [requests["relevance"]], step)[0].text
            relevance = parse_score(relevance_raw)
            reflection = Reflection(
                relevance_label=parse_label(relevance_raw, RELEVANCE_LABELS, "relevance"),
                relevance=relevance, support=None, raw=[relevance_raw])
            if self.judgements == "needed" and (relevance is None
                                                or relevance >= self.relevance_threshold):
                reflection.not_asked = ("support",)
                reflection.why_not_asked = ("FALLBACK needs a readable relevance below "
                                            f"{self.relevance_threshold}")
            else:
                if self.judgements == "needed":
                    support_raw = generate(self.llm, [requests["support"]], step)[0].text
                reflection.support = parse_label(support_raw, SUPPORT_LABELS, "support")
                reflection.raw.append(support_raw)
            for what, value in (("relevance label", reflection.relevance_label),
                                ("relevance score", reflection.relevance),
                                ("support label", reflection.support)):
                if value is None and what.split()[0] not in reflection.not_asked:
                    count_unreadable(step, unreadable, what)
            step.outputs = {"relevance_label": reflection.relevance_label,
                            "relevance": reflection.relevance, "support": reflection.support,
                            "raw": reflection.raw, "not_asked": list(reflection.not_asked),
                            "why_not_asked": reflection.why_not_asked}
            return reflection

    def _skip_reflection(self, passages: list[Passage], draft: Answer, trace: Trace,
                         why: str) -> Reflection:
        """The reflection step when falsification decided alone (`why`): nothing asked."""
        with trace.step("verify", "antisyco/reflect", passages=[p.id for p in passages],
                        draft=draft.text) as step:
            reflection = Reflection(None, None, None, not_asked=("relevance", "support"),
                                    why_not_asked=why)
            step.outputs = {"not_asked": list(reflection.not_asked),
                            "why_not_asked": reflection.why_not_asked}
            return reflection

    def _reflect_afresh(self, question: Question, passages: list[Passage], draft: Answer,
                        step: Step) -> dict[str, GenerationRequest]:
        """The auditor's own prompts: its system message, the passages, then the task."""
        titles = [p.title for p in passages]
        tasks = {"relevance": f"{question_block(question)}\n\n{RELEVANCE_TASK}",
                 "support": f"{question_block(question)}\nProposed answer: "
                            f"{neutralise_tags(draft.text)}\n\n{SUPPORT_TASK}"}

        def prompt(task: str) -> Render:
            def render(texts: list[str]) -> tuple[Message, ...]:
                # passages first: the two requests share this prefix within their call
                return (Message("system", REFLECT_SYSTEM),
                        Message("user", f"Passages:\n{render_passages(texts, titles)}\n\n"
                                        f"{task}"))
            return render
        return {purpose: GenerationRequest(
            fit(self.llm, prompt(task), passages, self.judge_tokens, step).messages)
            for purpose, task in tasks.items()}

    def _reflect_on_draft_reading(self, question: Question, passages: list[Passage],
                                  draft: Answer, step: Step) -> dict[str, GenerationRequest]:
        """Prompts that begin as the draft's plain prompt did (its system message, passages and
        question: `passages_head`), marked as a recurring prefix, then the task."""
        titles = [p.title for p in passages]
        tasks = {"relevance": AUDIT_INTRO + RELEVANCE_TASK,
                 "support": f"Proposed answer: {neutralise_tags(draft.text)}\n\n{SUPPORT_TASK}"}

        def prompt(task: str) -> Render:
            def render(texts: list[str]) -> tuple[Message, ...]:
                return (Message("system", DRAFT_SYSTEM),
                        Message("user", passages_head(question, texts, titles) + task))
            return render
        requests = {}
        for purpose, task in tasks.items():
            fitted = fit(self.llm, prompt(task), passages, self.judge_tokens, step)
            requests[purpose] = GenerationRequest(
                fitted.messages, cache_prefix=1, keep_prefix=True,
                cache_prefix_text=passages_head(question, fitted.evidence, titles))
        return requests

    # ----- phase 3: falsification -----

    def _claims(self, question: Question, draft: Answer, trace: Trace,
                unreadable: list[str]) -> list[str]:
        with trace.step("verify", "antisyco/claims", draft=draft.text) as step:
            if not draft.text.strip():
                step.outputs = {"claims": [], "note": "empty draft: nothing to check"}
                return []
            if self.extract_claims == "long_drafts" and is_short(draft.text,
                                                                 self.short_draft_words):
                claims = [whole_draft_claim(question, draft)]
                step.outputs = {"claims": claims, "default_claim": True,
                                "note": f"short draft (at most {self.short_draft_words} words): "
                                        "itself the one claim, not extracted"}
                return claims
            user = (f"{question_block(question)}\nAnswer: {draft.text}\n\n"
                    f"{CLAIMS_TASK.format(n=self.max_claims)}")
            request = GenerationRequest((Message("system", CLAIMS_SYSTEM), Message("user", user)),
                                        max_tokens=self.claim_tokens, purpose="claims",
                                        grammar=claims_grammar(self.max_claims,
                                                               self.claim_tokens))
            raw = generate(self.llm, [request], step)[0].text
            parsed = parse_claims(raw, self.max_claims)
            claims = parsed.claims
            if not claims:
                count_unreadable(step, unreadable, "claim list",
                            "the whole draft is checked as one claim")
                claims = [whole_draft_claim(question, draft)]
            step.outputs = {"claims": claims, "dropped": parsed.dropped,
                            "default_claim": not parsed.claims, "raw": raw}
            return claims

    def _falsify(self, question: Question, draft: Answer, claims: list[str], trace: Trace,
                 unreadable: list[str]) -> list[ClaimCheck]:
        with trace.step("verify", "antisyco/falsify", claims=claims, mode=self.contradiction,
                        trusted_source=self.kb_name, kb_k=self.kb_k) as step:
            checks = [ClaimCheck(c, self.knowledge_base.retrieve(c, self.kb_k)) for c in claims]
            to_judge = [c for c in checks if c.evidence]
            requests = [GenerationRequest(
                fit(self.llm, self._check_prompt(question, c, self.contradiction), c.evidence,
                    self.judge_tokens, step).messages,
                max_tokens=self.judge_tokens, purpose="contradiction",
                grammar=self._check_grammar()) for c in to_judge]
            completions = generate(self.llm, requests, step) if requests else []
            for check, completion in zip(to_judge, completions):
                check.raw = completion.text
                if self.contradiction == "qa":
                    self._score_by_reference_answer(check, draft.text,
                                                    completion.finish_reason == "length")
                else:
                    self._score_by_verdict(check)
            for i, check in enumerate(checks, 1):
                if not check.evidence:
                    step.warnings.append(f"claim {i}: the trusted knowledge base returned "
                                         "nothing; not checked")
                elif check.verdict == CANNOT_TELL:
                    step.warnings.append(
                        f"claim {i}: the trusted passages' answer ({check.reference}) cannot be "
                        "told to agree or disagree with the draft: neither contradicted nor "
                        "confirmed")
                elif check.score is None:
                    count_unreadable(step, unreadable, f"claim {i} contradiction")
            step.outputs = {"checks": [c.as_dict() for c in checks],
                            "raw": [c.raw for c in checks]}
            return checks

    def _check_grammar(self) -> str:
        """qa: `ANSWER: <short answer>`; judge: `VERDICT: <label>` and `SCORE: <0-1>`."""
        if self.contradiction == "qa":
            return labelled_answer_grammar(self.judge_tokens)
        return label_grammar("VERDICT", VERDICT_LABELS, scored=True)

    @staticmethod
    def _check_prompt(question: Question, check: ClaimCheck, mode: str) -> Render:
        """qa: answer the question from the reference passages; judge: verdict on the claim."""
        titles = [p.title for p in check.evidence]
        system, body, task = (
            (QA_CHECK_SYSTEM, question_block(question), QA_CHECK_TASK) if mode == "qa" else
            (JUDGE_CHECK_SYSTEM, f"Statement: {neutralise_tags(check.claim)}", JUDGE_CHECK_TASK))

        def render(texts: list[str]) -> tuple[Message, ...]:
            user = f"Reference passages:\n{render_passages(texts, titles)}\n\n{body}\n\n{task}"
            return (Message("system", system), Message("user", user))
        return render

    def _score_by_verdict(self, check: ClaimCheck) -> None:
        """judge mode: the stated score, when the verdict is readable and agrees with it."""
        check.verdict = parse_label(check.raw, VERDICT_LABELS, "verdict")
        score = parse_score(check.raw)
        if check.verdict is not None and score is not None and (
                (check.verdict == "CONTRADICTED") == (score >= self.contradiction_threshold)):
            check.score = score

    def _score_by_reference_answer(self, check: ClaimCheck, draft: str, cut: bool) -> None:
        """qa mode (see the module docstring); an unreadable reply leaves the score None. A
        reply `cut` at its token budget loses its last word, which the cut may have split
        ("from 195" of "from 1958")."""
        reference = parse_reference_answer(check.raw)
        if reference is None:
            return
        if cut and reference.text and not reference.not_stated:
            words = reference.text.split()
            if len(words) < 2:
                return  # one word, maybe split: unreadable
            reference = replace(reference, text=" ".join(words[:-1]))
        check.reference = reference.text
        if reference.not_stated or not grounded(reference.text, check.evidence):
            check.verdict, check.score = "UNRELATED", 0.0
            return
        agreement = compare_answers(reference.text, draft)
        if agreement is Agreement.AGREE:
            check.verdict, check.score = "CONSISTENT", 0.0
        elif agreement is Agreement.DISAGREE:
            check.verdict, check.score = "CONTRADICTED", 1.0
        else:
            check.verdict = CANNOT_TELL

    # ----- phase 4: decision -----

    def _decide(self, question: Question, passages: list[Passage], draft: Answer,
                reflection: Reflection, checks: list[ClaimCheck], trace: Trace,
                unreadable: list[str]) -> Answer:
        with trace.step("verify", "antisyco/decide", draft=draft.text) as step:
            contradicted = self._contradicted(checks)
            low_relevance = (reflection.relevance is not None
                             and reflection.relevance < self.relevance_threshold)
            unsupported = reflection.support == "UNSUPPORTED"
            reasons = [f"claim {i} contradicted by the trusted knowledge base "
                       f"({c.score:.2f} >= {self.contradiction_threshold}): {c.claim}"
                       for i, c in contradicted]
            if contradicted:
                decision = REPAIR
                answer, how = self._repair(question, [c for _, c in contradicted], step)
                reasons.append(how)
            elif low_relevance and unsupported and not self._confirmed(checks):
                decision = FALLBACK
                reasons.append(f"retrieved passages judged {reflection.relevance_label or '?'} "
                               f"({reflection.relevance:.2f} < {self.relevance_threshold}) and "
                               "the draft UNSUPPORTED by them")
                answer = self._fallback(question, step)
            else:
                decision = PASS
                relevance = ("not asked" if "relevance" in reflection.not_asked
                             else format_score(reflection.relevance))
                confirmed = ("every claim confirmed by the trusted knowledge base; "
                             if self._confirmed(checks) else "")
                reasons.append(f"{contradiction_summary(checks, self.contradiction_threshold)}; "
                               f"{confirmed}relevance {relevance}, "
                               f"support {reflection.support or 'not asked'}")
                answer = Answer(draft.text, draft.choice_index, draft.reason,
                                draft.parse_status, draft.raw)
            if unreadable:
                reasons.append("unreadable judgements (counted; they do not count towards an "
                               f"intervention): {', '.join(unreadable)}")
            answer.meta = {
                **draft.meta, "decision": decision, "reasons": reasons, "draft": draft.text,
                "confirmed_by_trusted_kb": decision == PASS and every_claim_consistent(checks),
                "relevance": reflection.relevance, "relevance_label": reflection.relevance_label,
                "support": reflection.support, "claims": [c.as_dict() for c in checks],
                "unparsable": len(unreadable), "unparsable_fields": list(unreadable)}
            step.decision = decision
            step.outputs = {"reasons": reasons, "answer": answer.text,
                            "parse_status": answer.parse_status}
            self._report_contradictions(passages, draft, answer, checks, step)
            self._report_relevance(passages, reflection, decision, step)
            return answer

    # ----- conflict report -----

    def _report_contradictions(self, passages: list[Passage], draft: Answer, answer: Answer,
                               checks: list[ClaimCheck], step: Step) -> None:
        kind = "contradicted_by_trusted_kb"
        if not checks:
            return
        contradicted = [c for c in checks
                        if c.score is not None and c.score >= self.contradiction_threshold]
        holding = [p for p in passages if draft.text.strip()
                   and numeric_containment(p.text, [draft.text])]
        repeated = same_answer(answer.text, draft.text) if answer.text.strip() else False
        for check in contradicted:
            draft_side = ConflictSide(draft.text, check.claim, [p.id for p in holding], "draft")
            trusted = passages_side(check.reference or "", check.evidence)
            trusted.source = trusted.source or self.kb_name
            step.conflicts.append(Conflict(
                kind, self.name, [draft_side, trusted], "kept" if repeated else "repaired",
                check.score, f"claim contradicted by the trusted knowledge base: {check.claim}"))
        unread = any(c.evidence and c.score is None for c in checks)
        status = "conflict" if contradicted else "could_not_tell" if unread else "no_conflict"
        step.checks.append(ConflictCheck(kind, self.name, status))

    def _report_relevance(self, passages: list[Passage], reflection: Reflection, decision: str,
                          step: Step) -> None:
        kind = "low_relevance"
        if "relevance" in reflection.not_asked:
            return  # not judged: the decision did not need it
        if reflection.relevance is None:
            step.checks.append(ConflictCheck(kind, self.name, "could_not_tell"))
            return
        if reflection.relevance >= self.relevance_threshold:
            step.checks.append(ConflictCheck(kind, self.name, "no_conflict"))
            return
        action = {FALLBACK: "fell_back", REPAIR: "repaired"}.get(decision, "kept")
        sides = [ConflictSide("", excerpt(p.text), [p.id], p.source) for p in passages]
        step.conflicts.append(Conflict(
            kind, self.name, sides, action, round(1.0 - reflection.relevance, 4),  # type: ignore[arg-type]
            f"retrieved passages judged {reflection.relevance_label or '?'} "
            f"(relevance {reflection.relevance:.2f} < {self.relevance_threshold})"))
        step.checks.append(ConflictCheck(kind, self.name, "conflict"))

    def _repair(self, question: Question, contradicted: list[ClaimCheck],
                step: Step) -> tuple[Answer, str]:
        """The repaired answer and how it was made: the reference answer of the contradicting
        trusted passages (`repair = "reference"`, when `_reference_repair` gives one), else
        answered again from those passages. The refuted draft is not shown: given it, the
        default model could copy it back into the repair."""
        if self.repair == "reference":
            answer = reference_repair(question, contradicted)
            if answer is not None:
                return answer, ("repaired with the reference answer the trusted passages gave "
                                "in falsification (no further call)")
        evidence = list({p.id: p for c in contradicted for p in c.evidence}.values())
        titles = [p.title for p in evidence]
        instruction = MULTIPLE_CHOICE if question.choices else FREE_FORM

        def render(texts: list[str]) -> tuple[Message, ...]:
            user = (f"Trusted passages:\n{render_passages(texts, titles)}\n\n"
                    f"{question_block(question)}\n\nAn earlier answer to this question "
                    "contradicted these trusted passages. Answer it again, from the trusted "
                    f"passages only. {instruction}")
            return (Message("system", REPAIR_SYSTEM), Message("user", user))
        fitted = fit(self.llm, render, evidence, self.answer_tokens, step)
        request = GenerationRequest(fitted.messages, max_tokens=self.answer_tokens,
                                    stop=ANSWER_STOP, purpose="repair")
        return (read_answer(generate(self.llm, [request], step)[0].text, question),
                "repaired by asking again from the trusted passages")

    def _fallback(self, question: Question, step: Step) -> Answer:
        instruction = MULTIPLE_CHOICE if question.choices else FREE_FORM
        messages = (Message("system", FALLBACK_SYSTEM),
                    Message("user", f"{question_block(question)}\n\n{instruction}"))
        request = GenerationRequest(messages, max_tokens=self.answer_tokens, stop=ANSWER_STOP,
                                    purpose="fallback")
        return read_answer(generate(self.llm, [request], step)[0].text, question)


def _source(retriever: Retriever | None) -> Path | None:
    """Where a retriever's passages come from: an index's directory, or the documents an
    in-memory retriever was built from (None when unknown)."""
    if isinstance(retriever, Index):
        return retriever.directory.resolve()
    source = getattr(retriever, "source", None)
    return Path(source).resolve() if source else None


def require_knowledge_base(config: Config) -> None:
    if not config.antisyco.kb:
        raise ConfigError("The antisyco verifier needs a trusted knowledge base.",
                          "Pass --kb PATH (from Python: kb=PATH, or antisyco.kb in a config): "
                          "an index directory or a folder of documents you trust.")
    check_knowledge_base(config.antisyco.kb)


register("verifier", "antisyco", section="antisyco", requires=require_knowledge_base,
         reports_conflicts=("contradicted_by_trusted_kb", "low_relevance"),
         description="checks the draft against a trusted knowledge base: pass, repair or fall "
                     "back")(AntiSycophancyVerifier.from_config)

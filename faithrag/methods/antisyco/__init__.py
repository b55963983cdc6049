"""Anti-sycophancy verification: check a drafted answer against the retrieved evidence and
against a separately indexed, trusted knowledge base, then PASS, REPAIR or FALLBACK.

Phase 1, the draft, is the pipeline's generator. The verifier then runs:

2. Reflection: two independent judgements (one batched call, or only those needed: see below):
   are the retrieved passages relevant to the question (RELEVANT / SUSPICIOUS / IRRELEVANT and
   a score 0-1), and do they support the draft (SUPPORTED / PARTIAL / UNSUPPORTED)? With
   `reuse_draft_reading` (default) both requests begin exactly as the plain draft prompt
   (faithrag.methods.plain_answer: its system message, the passages, the question) and mark that as
   a prefix to keep between calls (`GenerationRequest.keep_prefix`, as the draft does), so the
   embedded backend restores the keys/values the draft computed for the passages instead of
   computing them again (each call's results remain a function of its arguments: the prefix
   is always evaluated on its own, whatever ran before). Otherwise they have the auditor's own
   system message and the passages are read again.
3. Falsification: the draft is restated as at most `max_claims` self-contained claims; a short
   draft (at most `short_draft_words` words, no second sentence) is one fact and is itself the
   one claim, 'The answer to "<question>" is <draft>.', without a call (`extract_claims =
   "long_drafts"`, default; "always" asks the LLM for every draft). For each claim, `kb_k`
   passages are retrieved from the trusted knowledge base (the anti-context), and
   a contradiction score in [0, 1] is given to the claim. All claims are judged in one batched
   call. Two ways to score (`contradiction`):
   - "judge": the LLM reads the anti-context and the claim and states a verdict
     (CONTRADICTED / CONSISTENT / UNRELATED) and a 0-1 score: the paper's form. The score
     counts only when the verdict is readable and on the same side of the threshold
     (CONTRADICTED at or above it, the others below); otherwise the claim is unreadable.
   - "qa" (default): the LLM answers the question with a phrase copied from the anti-context,
     and that reference answer is compared with the draft by faithrag.answers.compare_answers
     (numbers, dates and units by value): DISAGREE is CONTRADICTED (score 1), AGREE is
     CONSISTENT (score 0), CANNOT_TELL is reported as such (verdict CANNOT_TELL, no score: the
     claim is neither contradicted nor confirmed, and not counted as unreadable); so "8,849
     metres" against a reference "5,200 metres" is contradicted, however many words the two
     share; a reply cut at its token budget loses its last word, which the cut may have split
     ("from 195" of "from 1958"). `contradiction_threshold` applies to the judge mode. The claim
     only retrieves the anti-context: it restates the question, so on "Was X born before Y?" it
     names both candidates and would contain any reference answer. A reference answer that is
     not in the anti-context (less than half of its words occur there) is the model's memory,
     not the knowledge base, and a reply that the passages do not say ("not stated", "unknown")
     is no answer: both contradict nothing (score 0, UNRELATED). Why: the default model (1.5B)
     could not state contradictions (its verdicts followed the prompt's wording, not the
     passages), while it answers questions from passages well, which is all this mode asks of
     it.
4. Decision: REPAIR when some claim's contradiction >= contradiction_threshold. With
   `repair = "reference"` (default) the answer is the reference answer the contradicting
   trusted passages gave in falsification (qa mode), with no further call, when the
   contradicted claims' reference answers agree (and, for multiple choice, it names an
   option). Otherwise, and always with "reanswer" (the paper's form), the answer is redone
   from the contradicting trusted passages (told that an earlier answer contradicted them, but
   not shown it). Why: in qa mode falsification has already answered the question from those
   passages, so the paper's repair asks the same question of the same passages again.
   Otherwise FALLBACK when relevance <
   relevance_threshold and the draft is UNSUPPORTED, unless the trusted knowledge base
   confirmed every claim (all CONSISTENT: a claim is confirmed only when the trusted
   passages' answer agrees with the draft, never because no contradiction was found;
   `fallback_when_confirmed = true` restores the
   paper's rule, which ignores the confirmation): the answer is redone without the retrieved
   passages. Otherwise PASS: the draft stands. Why: FALLBACK answers from the model's memory,
   a weaker basis than a draft the trusted passages agree with.

REPAIR goes before FALLBACK: when both hold, trusted evidence against the draft is a better basis
for the answer than the model's memory. So with `judgements = "needed"` (default) falsification
runs first and only the judgements the decision needs are asked: no reflection after a
contradicted claim (REPAIR follows whatever it says) nor after every claim was confirmed
(FALLBACK cannot follow), and the draft's support only when relevance is readable and below
`relevance_threshold` (otherwise FALLBACK cannot follow); relevance and support are then
separate calls. A judgement not asked is None and named in the reflect step's
`not_asked`; it is not counted as unreadable. `judgements = "all"` asks every judgement, the
reflection first, so each record carries all of them. Every phase is a step of the trace either
way (the claims step without an LLM call when the draft is its own claim, the reflect step
without one when nothing was asked).

Conflict report (on the decide step):
- each contradicted claim is a `contradicted_by_trusted_kb` conflict: one side the draft (its
  answer, the claim quoted, the retrieved passages that hold the draft's answer, source
  "draft"), the other the trusted passages (the answer read off them in qa mode, empty in
  judge mode; a quote of each; source the knowledge base's); confidence the contradiction
  score; action "repaired", or "kept" when the repair gave the draft's answer again. The check
  is "conflict", else "could_not_tell" when some claim's score is unreadable, else
  "no_conflict" (none when there was no claim to check);
- relevance below `relevance_threshold` is a `low_relevance` conflict (nothing is reported when
  relevance was not asked), one side per retrieved passage (no answer, its start quoted);
  confidence 1 - relevance; action "fell_back", "repaired" or "kept" after the decision. The
  check could not tell when the relevance score is unreadable.

An unreadable judgement (see faithrag.methods.judgements) is counted in
`answer.meta["unparsable"]`, named in `unparsable_fields` and warned about in the trace. Its
stated default never changes the draft on its own: an unreadable relevance or support does not
count towards FALLBACK, an unreadable contradiction does not count towards REPAIR. An
unreadable claim list is replaced by the single claim 'The answer to "<question>" is <draft>.',
so the draft is still checked against the knowledge base.
"""

from faithrag.methods.antisyco.claims import ClaimCheck, agreed_reference
from faithrag.methods.antisyco.prompts import (
    CONTRADICTION_MODES,
    DECISIONS,
    FALLBACK,
    PASS,
    RELEVANCE_LABELS,
    REPAIR,
    SUPPORT_LABELS,
    VERDICT_LABELS,
)
from faithrag.methods.antisyco.verifier import AntiSycophancyVerifier

__all__ = ["CONTRADICTION_MODES", "DECISIONS", "FALLBACK", "PASS", "RELEVANCE_LABELS", "REPAIR",
           "SUPPORT_LABELS", "VERDICT_LABELS", "AntiSycophancyVerifier", "ClaimCheck",
           "agreed_reference"]

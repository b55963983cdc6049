"""CF-RAG, the generator: counterfactual exploration and parallel arbitration.

1. counterfactuals — N near-miss variants of the question (counterfactuals.py);
2. dialectical retrieval — evidence for the question and every variant, deduplicated and
   filtered (dialectical.py);
3. clustering — spectral clustering of the evidence into K clusters (clustering.py);
4. sampling — M evidence subsets by stratified sampling (sampling.py);
5. drafts — M hypotheses (answer + rationale, rationale.py), sent as ONE `llm.generate([...])`
   call so a backend can batch them (llama.cpp reuses the shared prompt prefix inside the call;
   the OpenAI backend sends them concurrently);
6. scoring — coherence, causal discrimination, optional confidence and specificity, Ψ
   (scoring.py);
7. arbitration — when every hypothesis gives the same answer (consensus) the best Ψ wins;
   otherwise one synthesis call weighs the top 3 against their evidence.

Where this departs from the paper, and why (the public CF-RAG code is not followed: it uses
KMeans, a mean instead of the max over counterfactuals, sequential drafts and is missing modules):
- "The answer differs" is checked without extra calls: the counterfactual call also writes the
  model's short closed-book answer to the question and to each variant, compared by
  faithrag.answers.same_answer;
  when either is unknown, the variant must change a content word (counterfactuals.py).
- Counterfactuals come from six short requests in one batched call (the closed-book answer, then
  one variant per type, each with two worked examples as earlier chat turns) rather than one
  list: the 1.5B default model copied the placeholders or the question itself when asked for
  the whole list. The top N are kept (by similarity to the question, one per type first).
- The relevance filter and the dedup use the MiniLM bi-encoder; the filter keeps a passage when
  its best cosine over all queries is >= 0.1, and caps the pool at 12 by that best relevance.
- A hypothesis' rationale is by default not written by the model (`cfrag.rationale`): each draft
  is vanilla's short-answer prompt over its subset, and the rationale is the subset's sentence
  closest to question + answer (rationale.py). Asked for "Rationale: ... Answer: ...", the 1.5B
  default model reasoned itself onto the wrong passage and answered worse than with vanilla's
  prompt on the same passages (BENCHMARKS.md, section "CF-RAG"). "generated" is the paper's
  form, for models that write both well.
- Coherence (eq. 9–10) is the mean clipped cosine between the hypothesis (answer + rationale)
  and the passages of its subset: the equations themselves were not available here.
- Spectral clustering uses σ = median pairwise distance and clamps K to max(1, min(K, n // 2)).
- Stratified sampling: every cluster contributes max(1, round(B·|C|/n)) passages (B = 4) to
  each subset; a subset that repeats an earlier one is redrawn, then dropped. Optionally
  (`cfrag.anchor_top`, off by default; not in the paper) every subset keeps the passage most
  relevant to the question, so that a decisive passage the pool holds reaches every draft
  (what evidence division costs, and what the anchor changes: BENCHMARKS.md, section "CF-RAG").
- s(q, e) of the causal score is an LLM yes/no judge (default) or the bi-encoder, not a
  cross-encoder: no cross-encoder with packaged weights exists offline. The judge scores only
  the passages that some usable hypothesis was drafted from.
- Without counterfactuals (none passed the filter, or the ablation) there is no causal score
  and Ψ = coherence; an "unknown" hypothesis only wins when every hypothesis abstains.
- Ablations: counterfactuals off = retrieval for the question only and no causal score;
  evidence division off = one draft over the whole pool (M identical prompts at temperature 0
  would be M copies of one draft); causal scoring off = Ψ is coherence.
- If the synthesis reply is unparsable, the best-Ψ hypothesis is the answer and the fallback is
  recorded (trace decision and `Answer.meta["cfrag"]["synthesis_unparsable"]`).

Conflict report (on the arbitration step, with two or more drafts): drafts that give different
answers are a `passage_vs_passage` conflict, one side per answer group (its answer, the
passages of its drafts' evidence subsets, quoted), confidence the share of drafts outside the
largest group, action "kept" (the arbitration picks one answer; its step says which). The
check is "no_conflict" on a consensus of every draft, "could_not_tell" when some draft (or
every draft) could not be parsed and the others agree."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from faithrag.answers import same_answer
from faithrag.llm.base import LLM
from faithrag.methods.base import Retriever
from faithrag.methods.cfrag import counterfactuals as cf
from faithrag.methods.cfrag import scoring
from faithrag.methods.cfrag.clustering import spectral_clusters
from faithrag.methods.cfrag.dialectical import EvidencePool, dialectical_retrieval
from faithrag.methods.cfrag.drafting import draft_request, synthesis_request
from faithrag.methods.cfrag.parsing import (
    ParsedHypothesis,
    parse_answer_line,
    parse_counterfactuals,
    parse_hypothesis,
)
from faithrag.methods.cfrag.rationale import closest_sentence
from faithrag.methods.cfrag.sampling import stratified_subsets
from faithrag.methods.cfrag.settings import CFRAGConfig
from faithrag.methods.cfrag.vectors import VectorMemo
from faithrag.methods.common import generate, match_choice
from faithrag.methods.conflicts import passages_side
from faithrag.methods.plain_answer import read_answer
from faithrag.registry import register
from faithrag.retrieval.embedder import Embedder, get_embedder
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.retrieval.scorers import BiEncoderScorer, LLMJudgeScorer, RelevanceScorer
from faithrag.types import (
    PARSE_FAILED,
    Answer,
    Conflict,
    ConflictCheck,
    Passage,
    Question,
    Step,
    Trace,
)

if TYPE_CHECKING:
    from faithrag.config import Config

SYNTHESIS_TOP = 3


@dataclass
class Hypothesis:
    number: int  # 1-based, in draft order
    evidence: list[int]  # pool indices of its subset
    raw: str
    parsed: ParsedHypothesis
    choice_index: int | None
    needs_choice: bool  # multiple choice: the answer must name one option
    mean_logprob: float | None
    score: scoring.HypothesisScore | None = None

    @property
    def usable(self) -> bool:
        return self.parsed.answer is not None and (
            not self.needs_choice or self.choice_index is not None)

    @property
    def text(self) -> str:
        return f"{self.parsed.answer}. {self.parsed.rationale}".strip()


class CFRAG:
    name = "cfrag"

    def __init__(self, llm: LLM, settings: CFRAGConfig, retriever: Retriever | None = None, *,
                 k: int = 5, retrieval_mode: str = "bm25", answer_tokens: int = 48,
                 embedder: Embedder | None = None,
                 embedder_factory: Callable[[], Embedder] = get_embedder,
                 scorer: RelevanceScorer | None = None):
        self.llm = llm
        self.settings = settings
        self.retriever = retriever
        self.k = settings.retrieve_k or k
        self.retrieval_mode = retrieval_mode
        self.answer_tokens = answer_tokens
        self._embedder = embedder  # built on first use: loading the model takes time
        self._embedder_factory = embedder_factory
        self._scorer = scorer  # overrides the configured one (tests, custom scorers)
        self._judge: LLMJudgeScorer | None = None

    # ------------------------------------------------------------------ helpers
    def _base_embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    def _relevance_scorer(self, vectors: VectorMemo) -> RelevanceScorer:
        if self._scorer is not None:
            return self._scorer
        if self.settings.scorer == "bi_encoder":
            return BiEncoderScorer(vectors)  # over this question's embeddings
        if self._judge is None:
            self._judge = LLMJudgeScorer(self.llm)
        return self._judge

    def _seed(self, question: Question) -> int:
        return question_seed(self.settings.seed, question.text)

    # ------------------------------------------------------------------ stages
    def _counterfactuals(self, question: Question, vectors: VectorMemo,
                         trace: Trace) -> list[cf.Counterfactual]:
        s = self.settings
        with trace.step("generate", "cfrag.counterfactuals", question=question.text,
                        n=s.n_counterfactuals, sim_threshold=s.sim_threshold) as step:
            requests = cf.counterfactual_requests(question.text, s.counterfactual_tokens)
            replies = [c.text for c in generate(self.llm, requests, step)]  # one call
            parsed = parse_counterfactuals(cf.as_list(replies))
            screened = cf.screen(question.text, parsed, vectors, s.sim_threshold)
            selected = cf.select(screened, s.n_counterfactuals)
            if parsed.unparsable_lines:
                step.warnings.append(f"{len(parsed.unparsable_lines)} counterfactual replies "
                                     "unparsable")
            step.outputs = {
                "original_answer": parsed.original_answer,
                "candidates": [c.summary() for c in screened],
                "selected": [c.question for c in selected],
                "unparsable_lines": len(parsed.unparsable_lines),
            }
            step.decision = (f"kept {len(selected)} of {len(parsed.candidates)} counterfactuals "
                             f"({sum(c.kept for c in screened)} passed the filter)")
            return selected

    def _retrieve(self, question: Question, passages: list[Passage], queries: list[str],
                  vectors: VectorMemo, trace: Trace) -> EvidencePool:
        s = self.settings
        with trace.step("generate", "cfrag.dialectical_retrieval", queries=queries,
                        k=self.k) as step:
            if self.retriever is not None:
                source, question_hits = self.retriever, passages
            else:
                embedder = self._base_embedder() if self.retrieval_mode != "bm25" else None
                source = InMemoryRetriever(passages, mode=self.retrieval_mode, embedder=embedder)
                question_hits = None
            pool = dialectical_retrieval(queries, source, self.k, vectors, s.dedup,
                                         s.min_relevance, s.max_evidence, question_hits)
            step.outputs = {
                "pool": [(p.id, round(r, 3), pool.retrieved_by[p.id])
                         for p, r in zip(pool.passages, pool.relevance)],
                "duplicates_dropped": pool.duplicates,
                "irrelevant_dropped": pool.irrelevant,
                "over_cap_dropped": pool.over_cap,
            }
            step.decision = f"{len(pool.passages)} passages in the evidence pool"
            if not pool.passages:
                step.warnings.append("no evidence: the hypotheses are drafted without passages")
            return pool

    def _divide(self, question: Question, pool: EvidencePool, vectors: VectorMemo, seed: int,
                trace: Trace) -> list[list[int]]:
        s = self.settings
        n = len(pool.passages)
        if not s.evidence_division or n == 0:
            with trace.step("generate", "cfrag.division", evidence_division=False) as step:
                step.decision = ("evidence division off: one draft over the whole pool"
                                 if n else "no evidence: one draft without passages")
                return [list(range(n))]
        with trace.step("generate", "cfrag.clustering", k=s.k_clusters, n=n) as step:
            clustering = spectral_clusters(vectors.embed(pool.texts), s.k_clusters, seed)
            step.outputs = {
                "clusters": [[pool.passages[i].id for i in members]
                             for members in clustering.members()],
                "eigenvalues": clustering.eigenvalues, "sigma": round(clustering.sigma, 4)}
            step.decision = (f"{clustering.k_used} clusters"
                             + (f" (K={s.k_clusters} clamped for {n} passages)"
                                if clustering.k_used < s.k_clusters else ""))
        with trace.step("generate", "cfrag.sampling", m=s.m_subsets,
                        subset_size=s.subset_size, seed=seed) as step:
            # the pool is ordered by relevance to any query; the anchor is the question's own
            anchor = (int(vectors.cosine([question.text], pool.texts)[0].argmax())
                      if s.anchor_top else None)
            plan = stratified_subsets(clustering.labels, s.m_subsets, s.subset_size, seed,
                                      anchor=anchor)
            step.outputs = {"per_cluster": plan.allocation,
                            "subsets": [[pool.passages[i].id for i in sub]
                                        for sub in plan.subsets]}
            if anchor is not None:
                step.outputs["anchor"] = pool.passages[anchor].id
            step.decision = f"{len(plan.subsets)} evidence subsets"
            if plan.dropped_repeats:
                step.decision += (f"; {plan.dropped_repeats} dropped (the pool only allows "
                                  f"{len(plan.subsets)} distinct subsets)")
            return plan.subsets

    def _draft(self, question: Question, pool: EvidencePool, subsets: list[list[int]],
               vectors: VectorMemo, trace: Trace) -> list[Hypothesis]:
        s = self.settings
        written = s.rationale == "generated"
        with trace.step("generate", "cfrag.drafts", m=len(subsets),
                        rationale=s.rationale) as step:
            step.evidence["reason"] = ("the method drafts its answers from evidence subsets "
                                       "it samples")
            requests = [draft_request(self.llm, question, [pool.passages[i] for i in subset],
                                      s.draft_tokens if written else self.answer_tokens,
                                      s.use_confidence, step, written)
                        for subset in subsets]
            completions = generate(self.llm, requests, step)  # ONE call: batched/concurrent
            hypotheses = []
            for number, (subset, completion) in enumerate(zip(subsets, completions), 1):
                if written:
                    parsed = parse_hypothesis(completion.text)
                else:
                    answer = parse_answer_line(completion.text)
                    parsed = ParsedHypothesis(answer, closest_sentence(
                        question.text, answer, [pool.passages[i].text for i in subset], vectors)
                        if answer else "")
                choice = (match_choice(parsed.answer, question.choices)
                          if question.choices and parsed.answer is not None else None)
                hypotheses.append(Hypothesis(number, subset, completion.text, parsed, choice,
                                             bool(question.choices), completion.mean_logprob))
            unparsable = [h.number for h in hypotheses if not h.usable]
            step.outputs = {"hypotheses": [
                {"n": h.number, "answer": h.parsed.answer, "rationale": h.parsed.rationale,
                 "evidence": [pool.passages[i].id for i in h.evidence], "usable": h.usable}
                for h in hypotheses], "unparsable": unparsable}
            step.decision = f"{len(hypotheses) - len(unparsable)} of {len(hypotheses)} parsed"
            for number in unparsable:
                step.warnings.append(f"hypothesis {number} unparsable")
            return hypotheses

    def _score(self, question: Question, counterfactuals: list[cf.Counterfactual],
               pool: EvidencePool, hypotheses: list[Hypothesis], vectors: VectorMemo,
               trace: Trace) -> None:
        s = self.settings
        usable = [h for h in hypotheses if h.usable]
        causal_on = s.causal_scoring and bool(counterfactuals)
        with trace.step("generate", "cfrag.scoring", lambda_=s.lambda_,
                        scorer=s.scorer if causal_on else None) as step:
            union = sorted({i for h in usable for i in h.evidence})
            texts = [pool.texts[i] for i in union]
            relevance: dict[int, list[float]] = {}
            if causal_on and union:
                scorer = self._relevance_scorer(vectors)
                queries = [question.text] + [c.question for c in counterfactuals]
                table = [scorer.score(q, texts, step) for q in queries]
                relevance = {i: [row[j] for row in table] for j, i in enumerate(union)}
            h_vectors = vectors.embed([h.text for h in usable])
            q_vector = vectors.embed([question.text])[0]
            cf_vectors = vectors.embed([c.question for c in counterfactuals])
            for h, h_vec in zip(usable, h_vectors):
                coh = scoring.coherence(h_vec, vectors.embed([pool.texts[i] for i in h.evidence]))
                causal = (scoring.causal_discrimination(
                    [relevance[i][0] for i in h.evidence],
                    [[relevance[i][c] for i in h.evidence] for c in range(1, len(
                        counterfactuals) + 1)]) if relevance and h.evidence else None)
                conf = scoring.confidence(h.mean_logprob) if s.use_confidence else None
                spec = (scoring.specificity(h_vec, q_vector, cf_vectors)
                        if s.use_specificity else None)
                h.score = scoring.HypothesisScore(
                    coh, causal, conf, spec,
                    scoring.psi(coh, causal, s.lambda_, conf, spec, s.confidence_weight,
                                s.specificity_weight))
            step.outputs = {
                "hypotheses": [{"n": h.number, "answer": h.parsed.answer, **h.score.summary()}
                               for h in usable],
                "evidence_causal": {pool.passages[i].id: round(r[0] - max(r[1:]), 4)
                                    for i, r in relevance.items()},
            }
            step.decision = ("Ψ = (1-λ)·coherence + λ·causal" if causal_on else
                             "Ψ = coherence (" + ("causal scoring off" if not s.causal_scoring
                                                  else "no counterfactuals") + ")")

    def _arbitrate(self, question: Question, pool: EvidencePool, hypotheses: list[Hypothesis],
                   trace: Trace) -> tuple[Answer, dict]:
        with trace.step("generate", "cfrag.arbitration") as step:
            usable = [h for h in hypotheses if h.usable]
            informative = [h for h in usable if not h.parsed.abstained] or usable
            ranked = sorted(informative, key=lambda h: -h.score.psi)
            best = ranked[0]
            groups = self._groups(question, ranked)
            meta: dict = {"hypotheses": [
                {"n": h.number, "answer": h.parsed.answer,
                 "evidence": [pool.passages[i].id for i in h.evidence],
                 **(h.score.summary() if h.score else {})} for h in hypotheses],
                "unparsable_drafts": len(hypotheses) - len(usable)}
            self._report(question, pool, hypotheses, groups, step)
            why_best = (f"hypothesis {best.number} has the highest Ψ {best.score.psi:.3f} "
                        f"(coherence {best.score.coherence:.3f}"
                        + (f", causal {best.score.causal:+.3f}" if best.score.causal is not None
                           else "") + ")")
            if len(groups) == 1:
                step.decision = (f"consensus: all {len(ranked)} hypotheses answer "
                                 f"{best.parsed.answer!r}; {why_best}")
                meta["decision"] = "consensus"
                step.outputs = {"winner": best.number, "answer": best.parsed.answer}
                return self._answer(question, best), meta
            top = ranked[:SYNTHESIS_TOP]
            evidence = sorted({i for h in top for i in h.evidence})
            request = synthesis_request(
                self.llm, question, [pool.passages[i] for i in evidence],
                [(h.parsed.answer, h.parsed.rationale, h.score.psi) for h in top],
                self.answer_tokens, step)
            raw = generate(self.llm, [request], step)[0].text
            final = read_answer(raw, question)
            meta["decision"] = "synthesis"
            split = "; ".join(f"{g[0].parsed.answer!r} × {len(g)}" for g in groups)
            if final.parse_status == PARSE_FAILED or not final.text.strip():
                meta["synthesis_unparsable"] = True
                step.warnings.append("synthesis reply unparsable; the best-Ψ hypothesis answers")
                step.decision = (f"hypotheses disagree ({split}); synthesis unparsable, so "
                                 f"{why_best} and answers")
                step.outputs = {"winner": best.number, "synthesis_raw": raw}
                return self._answer(question, best), meta
            agrees = next((h.number for h in top if self._same(question, h, final)), None)
            step.decision = (f"hypotheses disagree ({split}); synthesis over the top {len(top)} "
                             f"by Ψ chose {final.text!r}"
                             + (f", as hypothesis {agrees}" if agrees else ", a new answer"))
            step.outputs = {"candidates": [h.number for h in top], "answer": final.text,
                            "agrees_with": agrees}
            final.reason = next((h.parsed.rationale for h in top if h.number == agrees), "")
            return final, meta

    # ------------------------------------------------------------------ arbitration helpers
    def _report(self, question: Question, pool: EvidencePool, hypotheses: list[Hypothesis],
                groups: list[list[Hypothesis]], step: Step) -> None:
        """The drafts' disagreement on `step` (see the module docstring)."""
        if len(hypotheses) < 2:
            return
        kind = "passage_vs_passage"
        if len(groups) < 2:
            unread = any(not h.usable for h in hypotheses)
            step.checks.append(ConflictCheck(kind, self.name,
                                             "could_not_tell" if unread else "no_conflict"))
            return
        sides = []
        for group in groups:
            first = group[0]
            answer = (question.choices[first.choice_index]
                      if question.choices and first.choice_index is not None
                      else first.parsed.answer or "")
            used = sorted({i for h in group for i in h.evidence})
            sides.append(passages_side(answer, [pool.passages[i] for i in used]))
        drafts = sum(len(g) for g in groups)
        step.conflicts.append(Conflict(
            kind, self.name, sides, "kept", (drafts - max(len(g) for g in groups)) / drafts,
            "drafts over different evidence subsets give different answers; the arbitration "
            "picks one"))
        step.checks.append(ConflictCheck(kind, self.name, "conflict"))

    @staticmethod
    def _same(question: Question, h: Hypothesis, answer: Answer) -> bool:
        if question.choices:
            return h.choice_index == answer.choice_index
        return same_answer(h.parsed.answer, answer.text)

    @staticmethod
    def _groups(question: Question, ranked: list[Hypothesis]) -> list[list[Hypothesis]]:
        groups: list[list[Hypothesis]] = []
        for h in ranked:
            # every member must match: same_answer is lenient, so not transitive ("1969" matches
            # "July 1969" and "June 1969"), and a group must not depend on the Ψ order
            home = next((g for g in groups if all(
                x.choice_index == h.choice_index if question.choices
                else same_answer(x.parsed.answer, h.parsed.answer) for x in g)), None)
            if home is None:
                groups.append([h])
            else:
                home.append(h)
        return groups

    @staticmethod
    def _answer(question: Question, h: Hypothesis) -> Answer:
        if question.choices:
            return Answer(text=question.choices[h.choice_index], choice_index=h.choice_index,
                          reason=h.parsed.rationale, raw=h.raw)
        return Answer(text=h.parsed.answer, reason=h.parsed.rationale, raw=h.raw)

    # ------------------------------------------------------------------ the protocol
    def generate(self, question: Question, passages: list[Passage], trace: Trace) -> Answer:
        s = self.settings
        vectors = VectorMemo(self._base_embedder())
        counterfactuals = self._counterfactuals(question, vectors, trace) if s.counterfactuals \
            else []
        queries = [question.text] + [c.question for c in counterfactuals]
        pool = self._retrieve(question, passages, queries, vectors, trace)
        subsets = self._divide(question, pool, vectors, self._seed(question), trace)
        hypotheses = self._draft(question, pool, subsets, vectors, trace)
        raw = "\n---\n".join(h.raw for h in hypotheses)
        if not any(h.usable for h in hypotheses):
            with trace.step("generate", "cfrag.arbitration") as step:
                step.decision = "no hypothesis could be parsed"
                step.checks.append(ConflictCheck("passage_vs_passage", self.name,
                                                 "could_not_tell"))
            return Answer(text=hypotheses[0].raw.strip() if hypotheses else "", raw=raw,
                          parse_status=PARSE_FAILED,
                          meta={"cfrag": {"decision": "unparsable",
                                          "unparsable_drafts": len(hypotheses)}})
        self._score(question, counterfactuals, pool, hypotheses, vectors, trace)
        answer, meta = self._arbitrate(question, pool, hypotheses, trace)
        meta["counterfactuals"] = queries[1:]
        meta["pool"] = [p.id for p in pool.passages]
        answer.raw = raw
        answer.meta = {**answer.meta, "cfrag": meta}
        return answer


def question_seed(seed: int, question: str) -> int:
    """The seed of a question's clustering and subset sampling (`cfrag.seed` + the text)."""
    digest = hashlib.sha256(f"{seed}:{question}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


@register("generator", "cfrag", section="cfrag", reports_conflicts=("passage_vs_passage",),
          description="counterfactual queries, evidence subsets, arbitration of drafts")
def build_cfrag(llm: LLM, config: Config, retriever: Retriever | None) -> CFRAG:
    embedder_config = (config.retrieval.embedder, config.use_cache, config.llm.n_threads)

    def embedder() -> Embedder:
        name, use_cache, threads = embedder_config
        return get_embedder(name, use_cache=use_cache, threads=threads)

    return CFRAG(llm, config.cfrag, retriever, k=config.retrieval.k,
                 retrieval_mode=config.retrieval.mode,
                 answer_tokens=config.generation.answer_tokens, embedder_factory=embedder)

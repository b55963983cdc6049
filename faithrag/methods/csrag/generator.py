"""CSRAG: conflict-suppressed decoding (context vs. the model's memory).

1. facts: the model lists what it believes about the question, before seeing the context;
2. paraphrase: two rewrites of each passage are appended to the context (cached per passage);
3. decode with `logits += alpha·[t ∈ T_p] + beta·[t ∈ T_c]` at every step, T_p the content
   tokens of the facts and T_c those of the enhanced context.

The answer step is the paper's CoT-JSON prompt for multiple choice (or, in `choices` mode, the
options scored with the same bias; in `json_scored` mode, the JSON reply's Reason generated
without the bias and the options scored in its Answer slot with it), and the plain short-answer
prompt for free-form questions.

Conflict report (multiple choice only; no model call is added): the facts of step 1 that name
exactly one option each (whole words, `answers.containment`) say what the model remembers; a
fact naming several options ("moved from A to B") says nothing. When they all name one option
and the answer is another option that some retrieved passage holds, a `context_vs_memory`
conflict is reported on the generate step: the model's memory (that option, the first such fact
quoted, source "memory") against the passages holding the chosen option; action "kept" (the
answer follows the context, as CSRAG means it to). The check is "no_conflict" when those facts
name the chosen option, and "could_not_tell" when the facts are unread, name no option or
disagree, the answer names no option, or no passage holds the chosen option. Free-form answers
get no check: the facts cannot be compared with them cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from faithrag.answers import containment
from faithrag.errors import ConfigError
from faithrag.llm.base import LLM, TokenBias
from faithrag.methods.conflicts import passages_side
from faithrag.methods.cot_answer import answer_json, answer_json_scored
from faithrag.methods.csrag.cache import JsonCache
from faithrag.methods.csrag.facts import Facts, extract_facts
from faithrag.methods.csrag.paraphrase import Paraphraser, Paraphrases
from faithrag.methods.csrag.settings import CSRAGConfig
from faithrag.methods.csrag.token_sets import content_token_ids, csrag_bias, decode_ids
from faithrag.methods.option_scoring import answer_by_scoring
from faithrag.methods.plain_answer import answer_plain
from faithrag.paths import cache_dir
from faithrag.registry import register
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
    from faithrag.retrieval.retriever import Retriever


class AblationCell(NamedTuple):
    alpha: float
    beta: float
    filter_stopwords: bool = True
    case_variants: bool = False

    @property
    def label(self) -> str:
        return (f"a={self.alpha:g} b={self.beta:g}" + ("" if self.filter_stopwords else " +stop")
                + (" +case" if self.case_variants else ""))


# The paper's decoding ablations: alpha swept at beta = 3, beta swept at alpha = -1, boost only
# (0, 3), suppress only (-1, 0), neither (0, 0: plain choice scoring), stopwords not filtered;
# and ours: the sets with each word's case variants (token_sets).
ABLATION_GRID = (
    AblationCell(0, 0), AblationCell(0, 3), AblationCell(-1, 3), AblationCell(-3, 3),
    AblationCell(-5, 3), AblationCell(-1, 0), AblationCell(-1, 1), AblationCell(-1, 5),
    AblationCell(-1, 3, filter_stopwords=False), AblationCell(-1, 3, case_variants=True))


def enhanced_context(passages: list[Passage], paraphrases: list[Paraphrases]) -> list[Passage]:
    """The original passages first, then every paraphrase (so truncation drops rewrites first)."""
    extra = []
    for passage, para in zip(passages, paraphrases):
        for j, text in enumerate(para.texts, 1):
            title = f"{passage.title} (paraphrase {j})" if passage.title else f"paraphrase {j}"
            extra.append(Passage(f"{passage.id}#paraphrase{j}", text, title, passage.source,
                                 meta={"paraphrase_of": passage.id}))
    return list(passages) + extra


class CSRAG:
    name = "csrag"

    def __init__(self, llm: LLM, config: CSRAGConfig | None = None, max_tokens: int = 256,
                 answer_tokens: int = 48, paraphraser: Paraphraser | None = None,
                 facts_cache: JsonCache | None = None):
        self.llm = llm
        self.config = config or CSRAGConfig()
        self.max_tokens = max_tokens
        self.answer_tokens = answer_tokens
        self.paraphraser = paraphraser or Paraphraser(llm, self.config.paraphrase_tokens)
        self.facts_cache = facts_cache
        if self.config.ablation_grid and self.config.answer_mode == "json":
            raise ConfigError("csrag.ablation_grid needs choice-scored answers.",
                              "Set csrag.answer_mode to choices or json_scored (--method "
                              "csrag_choices or csrag_json_scored): the cells are "
                              "read off one forward pass there, whereas a JSON answer needs one "
                              "decode per cell.")

    def generate(self, question: Question, passages: list[Passage], trace: Trace) -> Answer:
        cfg = self.config
        with trace.step("facts", self.name, question=question.text) as step:
            facts = extract_facts(self.llm, question, step, cfg.fact_tokens, self.facts_cache)
            step.outputs.update({"facts": facts.items,
                                 "parse_status": "ok" if facts.parsed else "failed"})
            if not facts.parsed:
                step.warnings.append("no fact list in the output: nothing is suppressed")

        context = list(passages)
        if cfg.enhance_context and passages:
            with trace.step("paraphrase", self.name, passages=[p.id for p in passages]) as step:
                paraphrases = self.paraphraser.paraphrase(passages, step)
                context = enhanced_context(passages, paraphrases)
                step.outputs = {
                    "paraphrases": {p.id: para.texts for p, para in zip(passages, paraphrases)},
                    "status": {p.id: para.status for p, para in zip(passages, paraphrases)},
                    "cached": sum(para.cached for para in paraphrases),
                    "failed": sum(para.status == "failed" for para in paraphrases)}

        with trace.step("bias", self.name, alpha=cfg.alpha, beta=cfg.beta,
                        filter_stopwords=cfg.filter_stopwords,
                        case_variants=cfg.case_variants) as step:
            parametric = content_token_ids(self.llm, facts.text, cfg.filter_stopwords,
                                           cfg.case_variants)
            evidence = content_token_ids(self.llm, "\n".join(p.text for p in context),
                                         cfg.filter_stopwords, cfg.case_variants)
            bias = csrag_bias(parametric, evidence, cfg.alpha, cfg.beta)
            variants = self._ablation_biases(facts.text, context, parametric, evidence)
            step.outputs = {
                "parametric_tokens": len(parametric), "context_tokens": len(evidence),
                "overlap": len(parametric & evidence),
                "parametric_only": decode_ids(self.llm, parametric - evidence),
                "context_sample": decode_ids(self.llm, evidence - parametric)}

        with trace.step("generate", self.name, question=question.text,
                        passages=[p.id for p in context]) as step:
            answer = self._answer(question, context, bias, step, variants)
            if cfg.probe_choices and question.choices:
                step.outputs["choice_probabilities"] = self._probe(question, context, bias, step)
            step.outputs.update({"answer": answer.text, "reason": answer.reason,
                                 "parse_status": answer.parse_status})
            if "reason_status" in answer.meta:
                step.outputs["reason_status"] = answer.meta["reason_status"]
            if question.choices:
                self._report_memory(question, facts, passages, answer, step)
        return answer

    def _report_memory(self, question: Question, facts: Facts, passages: list[Passage],
                       answer: Answer, step: Step) -> None:
        """The facts against the chosen option (see the module docstring)."""
        choices = question.choices or []
        named: dict[int, str] = {}  # option -> the first fact that names it and no other
        for fact in facts.items:
            options = [i for i, choice in enumerate(choices) if containment(fact, [choice])]
            if len(options) == 1:
                named.setdefault(options[0], fact)
        chosen = answer.choice_index
        holding = [p for p in passages
                   if chosen is not None and containment(p.text, [choices[chosen]])]
        kind = "context_vs_memory"
        if chosen is not None and list(named) == [chosen]:
            status = "no_conflict"
        elif chosen is None or len(named) != 1 or not holding:
            status = "could_not_tell"
        else:
            status = "conflict"
            ((remembered, fact),) = named.items()
            step.conflicts.append(Conflict(
                kind, self.name,
                [ConflictSide(choices[remembered], fact, [], "memory"),
                 passages_side(choices[chosen], holding)],
                "kept", None, "the facts the model listed before reading the context name "
                              "another option; the answer follows the context"))
        step.checks.append(ConflictCheck(kind, self.name, status))  # type: ignore[arg-type]

    def _ablation_biases(self, facts: str, context: list[Passage], parametric: set[int],
                         evidence: set[int]) -> dict[str, TokenBias]:
        """Every ablation cell's bias; `parametric` and `evidence` are the sets built with the
        config's stopword and case settings, the sets of a cell's other settings are built here."""
        cfg = self.config
        if not cfg.ablation_grid:
            return {}
        text = "\n".join(p.text for p in context)
        sets = {(cfg.filter_stopwords, cfg.case_variants): (parametric, evidence)}
        for key in {(cell.filter_stopwords, cell.case_variants) for cell in ABLATION_GRID}:
            if key not in sets:
                sets[key] = (content_token_ids(self.llm, facts, *key),
                             content_token_ids(self.llm, text, *key))
        return {cell.label: csrag_bias(*sets[cell.filter_stopwords, cell.case_variants],
                                       cell.alpha, cell.beta)
                for cell in ABLATION_GRID}

    def _answer(self, question: Question, context: list[Passage], bias: TokenBias,
                step: Step, variants: dict[str, TokenBias]) -> Answer:
        if not question.choices:
            return answer_plain(self.llm, question, context, step, self.answer_tokens, bias)
        if self.config.answer_mode == "choices":
            return answer_by_scoring(self.llm, question, context, step, bias, variants)
        if self.config.answer_mode == "json_scored":
            return answer_json_scored(self.llm, question, context, step, self.max_tokens, bias,
                                      variants)
        return answer_json(self.llm, question, context, step, self.max_tokens, bias)

    def _probe(self, question: Question, context: list[Passage], bias: TokenBias,
               step: Step) -> dict[str, dict[str, float]]:
        """Option probabilities with and without the bias (the paper's Figure 3), both read off
        one scoring pass."""
        scored = answer_by_scoring(self.llm, question, context, step, None, {"with_bias": bias})
        with_bias = scored.meta["variants"]["with_bias"]["probabilities"]
        return {"without_bias": scored.meta["choice_probabilities"],
                "with_bias": dict(zip(question.choices or (), with_bias))}


def build_csrag(llm: LLM, config: Config, answer_mode: str | None = None) -> CSRAG:
    """CSRAG with `config.csrag` (its answer mode replaced by `answer_mode` if given); facts and
    paraphrases are cached under the cache directory unless `use_cache` is off."""
    settings = config.csrag
    if answer_mode:
        settings = settings.model_copy(update={"answer_mode": answer_mode})
    root = cache_dir() / "csrag" if config.use_cache else None
    return CSRAG(llm, settings, config.generation.max_tokens, config.generation.answer_tokens,
                 Paraphraser(llm, settings.paraphrase_tokens,
                             JsonCache(root / "paraphrases") if root else None),
                 facts_cache=JsonCache(root / "facts") if root and settings.cache_facts else None)


@register("generator", "csrag", section="csrag", choices=True,
          reports_conflicts=("context_vs_memory",),
          description="decoding biased against memorised facts; the paper's JSON answer")
def build_csrag_json(llm: LLM, config: Config, retriever: Retriever | None) -> CSRAG:
    return build_csrag(llm, config)


@register("generator", "csrag_choices", section="csrag", choices=True, scores_options=True,
          reports_conflicts=("context_vs_memory",),
          description="CSRAG's bias applied while scoring the options")
def build_csrag_choices(llm: LLM, config: Config, retriever: Retriever | None) -> CSRAG:
    return build_csrag(llm, config, "choices")


@register("generator", "csrag_json_scored", section="csrag", choices=True,
          scores_options=True,
          reports_conflicts=("context_vs_memory",),
          description="the JSON reason unbiased, then the options scored with the bias")
def build_csrag_json_scored(llm: LLM, config: Config, retriever: Retriever | None) -> CSRAG:
    return build_csrag(llm, config, "json_scored")

"""Resumable evaluation of re-rankers on ranking sets (kre_conflict_rank, ramdocs_rank).

Same run directory as faithrag/eval/runner.py (faithrag/eval/run_dir.py: manifest.json +
append-only results.jsonl, resume by id, a failing item is recorded and the run goes on). Per item:

1. First stage: the item's candidates ordered by BM25 over those candidates for the query
   (passages without a matching term follow in file order, score 0) — the retriever's own
   order, which is what re-rankers get in the pipeline. `first_stage="given"` keeps the file
   order instead (the sets shuffle it with a seeded RNG).
2. The re-ranker (`spec.rerank`; None = the first-stage order) re-orders the candidates and may
   remove some. Ranking metrics (faithrag.eval.ranking_metrics): nDCG@1/5/10 and the
   contrary rate in the top 1/5/10; removed passages count as not ranked.
3. Optionally (`answer_top=k`) the generator of `config.pipeline.method` answers the QA version
   of the item from the top k passages (the downstream measurement). The QA version is the item
   with the same id in the QA set named by the id's prefix ("kre_musique::…" → kre_musique),
   same split. Gold: for a multiple-choice QA version, the option equal to the ranking item's
   `meta.golden_answer` (what the reference passage says; KRE's QA `answer` is the misleading
   context's answer, the wrong target here), else the QA `answer`; `contrary_answer` = chose
   `meta.contrary_answer`. For a free-form QA version: `meta.gold_answers` (else the QA answers)
   and `meta.wrong_answers` (else `[meta.contrary_answer]`); correct = some gold answer is
   contained in the answer and no wrong one is (`any_gold`, `wrong_answer` recorded apart).
   With `answer_cache` (a directory) the answering calls are kept there and shared by every run
   that names it: re-rankers that put the same passages first get the same answer without
   computing it again (faithrag/eval/answer_cache.py; `extra.answer_cached` says so).

Record fields beyond the report schema: `ranking` (ids, best first), `removed` (id, reason,
is_contrary), `detection` (removed / removed_contrary / contrary counts; detected pairs and pairs
holding a contrary passage, read from trace steps whose outputs carry a "pair"), `rerank_parse`
(parse counts summed over the re-ranker's steps), `rerank_cost` (LLM calls, tokens and seconds
of the re-ranking stage alone), `rerank_steps` (each re-ranking step's decision and outputs,
raw model replies included).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Literal

from faithrag.answers import containment
from faithrag.config import Config
from faithrag.errors import ConfigError, DataError
from faithrag.eval.answer_cache import AnswerCache, backend_identity
from faithrag.eval.datasets import Dataset, QAItem, RankItem, load_dataset
from faithrag.eval.executors import RayCluster, evaluate_items
from faithrag.eval.metrics import aggregate
from faithrag.eval.ranking_metrics import ranking_metrics
from faithrag.eval.run_dir import (
    ResultsFile,
    code_version,
    model_identity,
    platform_identity,
    run_lock,
    stage_record,
    write_manifest,
)
from faithrag.eval.runner import EvalSpec, _progress
from faithrag.llm.base import LLM
from faithrag.methods.base import Generator, Reranker, RerankResult
from faithrag.methods.common import match_choice
from faithrag.pipeline import Pipeline
from faithrag.types import Passage, Question, Trace

NO_RERANK = "none"
FIRST_STAGES = ("bm25", "given")
# settings of a ranking run that a resume must also match
_RANK_MANIFEST_KEYS = ("kind", "first_stage", "answer_top")


@dataclass
class RankOptions:
    first_stage: Literal["bm25", "given"] = "bm25"
    answer_top: int | None = None  # answer the QA version from the top k passages
    answer_cache: str | Path | None = None  # keep and share the answering calls here

    def __post_init__(self) -> None:
        if self.first_stage not in FIRST_STAGES:
            raise ConfigError(f"Unknown first stage {self.first_stage!r}.",
                              f"Choose one of {', '.join(FIRST_STAGES)}.")
        if self.answer_top is not None and self.answer_top < 1:
            raise ConfigError("--answer-top must be >= 1.", "Leave it out to skip answering.")


@dataclass
class Downstream:
    question: Question
    gold_index: int | None  # multiple choice
    golds: list[str]
    wrong: list[str]
    contrary_index: int | None = None


def first_stage_order(item: RankItem, first_stage: str, trace: Trace) -> list[Passage]:
    candidates = item.as_passages()
    if first_stage == "given":
        return candidates
    from faithrag.retrieval.retriever import InMemoryRetriever

    with trace.step("retrieve", "bm25", query=item.query, k=len(candidates)) as step:
        hits = InMemoryRetriever(candidates, mode="bm25").retrieve(item.query, len(candidates))
        found = {p.id for p in hits}
        ordered = hits + [p.with_score(0.0) for p in candidates if p.id not in found]
        step.outputs = {"passages": [(p.id, p.score) for p in ordered]}
    return ordered


def downstream_for(item: RankItem, qa: QAItem) -> Downstream:
    """The QA version's question with the gold of the ranking item (rule in the module doc)."""
    meta = item.meta
    if qa.choices is not None:
        golden = meta.get("golden_answer")
        gold_index = match_choice(golden, qa.choices) if golden else qa.answer_idx
        if gold_index is None:
            raise DataError(f"{item.id}: golden answer {golden!r} is not among the options",
                            "check the ranking item's meta.golden_answer")
        contrary = meta.get("contrary_answer")
        return Downstream(qa.as_question(), gold_index, [qa.choices[gold_index]],
                          [contrary] if contrary else [],
                          match_choice(contrary, qa.choices) if contrary else None)
    golds = list(meta.get("gold_answers") or qa.answers)
    wrong = list(meta.get("wrong_answers") or ([meta["contrary_answer"]]
                                                if meta.get("contrary_answer") else []))
    return Downstream(Question(qa.question, qa.id), None, golds, wrong)


def score_downstream(d: Downstream, text: str, choice_index: int | None) -> tuple[bool,
                                                                                  dict[str, int]]:
    if d.gold_index is not None:
        values = {}
        if d.contrary_index is not None:
            values["contrary_answer"] = int(choice_index == d.contrary_index)
        return choice_index == d.gold_index, values
    any_gold = containment(text, d.golds)
    wrong = bool(d.wrong) and containment(text, d.wrong)
    return any_gold and not wrong, {"any_gold": int(any_gold), "wrong_answer": int(wrong)}


def load_qa_versions(items: list[RankItem], data_dir: str | None, split: str
                     ) -> dict[str, QAItem]:
    """QA items by id from the sets named by the ranking ids' prefixes."""
    names = sorted({item.id.split("::", 1)[0] for item in items})
    qa: dict[str, QAItem] = {}
    for name in names:
        dataset = load_dataset(name, data_dir, split)
        if dataset.kind != "qa":
            raise DataError(f"{name} is not a QA set", "answer_top needs the QA version")
        qa.update({i.id: i for i in dataset.items})
    missing = [item.id for item in items if item.id not in qa]
    if missing:
        raise DataError(f"{len(missing)} ranking item(s) have no QA version, e.g. {missing[0]}",
                        f"expected the same id in {', '.join(names)} ({split} split)")
    return qa


def _rerank_figures(trace: Trace) -> tuple[dict[str, Any], dict[str, Any], list[list[str]]]:
    """Cost and parse counts of the re-ranking stage, and the conflicting pairs it named."""
    steps = [s for s in trace.steps if s.stage == "rerank"]
    cost = {"llm_calls": sum(len(s.llm_calls) for s in steps),
            "prompt_tokens": sum(s.prompt_tokens for s in steps),
            "completion_tokens": sum(s.completion_tokens for s in steps),
            "seconds": sum(s.seconds for s in steps)}
    parse: dict[str, Any] = {"outputs": 0, "failed": 0, "repaired": 0, "repairs": {}}
    pairs = []
    for s in steps:
        counts = s.outputs.get("parse")
        if isinstance(counts, dict):
            for key in ("outputs", "failed", "repaired"):
                parse[key] += counts.get(key, 0)
            for kind, n in counts.get("repairs", {}).items():
                parse["repairs"][kind] = parse["repairs"].get(kind, 0) + n
        pair = s.outputs.get("pair")
        if isinstance(pair, list) and len(pair) == 2:
            pairs.append(pair)
    return cost, parse, pairs


def _rank_evaluator(spec: EvalSpec, config: Config, label: str, dataset_name: str,
                    options: RankOptions, qa: dict[str, QAItem], llm: LLM
                    ) -> Callable[[RankItem], dict[str, Any]]:
    """evaluate_item with the re-ranker and (when answering) the generator built around `llm`."""
    reranker = (Pipeline.from_config(config, llm=llm, plain=True, rerank=spec.rerank).reranker
                if spec.rerank else None)
    generator = None
    if options.answer_top is not None:
        answer_llm: LLM = llm if options.answer_cache is None else AnswerCache(
            llm, options.answer_cache, backend_identity(config, model_identity(config)[1]))
        generator = Pipeline.from_config(config, llm=answer_llm, plain=True).generator
    return lambda item: evaluate_item(item, reranker, label, dataset_name, options, generator,
                                      qa.get(item.id))


def evaluate_item(item: RankItem, reranker: Reranker | None, label: str, dataset_name: str,
                  options: RankOptions, generator: Generator | None = None,
                  qa: QAItem | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"id": item.id, "dataset": dataset_name, "method": label,
                              "gold": [], "error": None}
    start = time.perf_counter()
    trace = Trace()
    try:
        ordered = first_stage_order(item, options.first_stage, trace)
        question = Question(item.query, item.id)
        result = (reranker.rerank(question, ordered, trace) if reranker is not None
                  else RerankResult(ordered))
        ranking = [p.id for p in result.passages]
        values: dict[str, Any] = dict(ranking_metrics(item, ranking))
        prediction, correct, status, choice_index = None, None, "ok", None
        if generator is not None and qa is not None and options.answer_top:
            down = downstream_for(item, qa)
            record["gold"] = down.golds
            answer = generator.generate(down.question, result.passages[: options.answer_top],
                                        trace)
            prediction, status, choice_index = answer.text, answer.parse_status, answer.choice_index
            correct, answer_values = score_downstream(down, answer.text, answer.choice_index)
            if status != "ok":  # unread output answers nothing, whatever it contains
                correct, answer_values = False, {name: 0 for name in answer_values}
            values.update(answer_values)
    except Exception as exc:  # noqa: BLE001 (one bad item must not stop the run)
        return {**record, "prediction": None, "correct": None, "parse_status": "error",
                "error": f"{type(exc).__name__}: {exc}", "prompt_tokens": 0,
                "completion_tokens": 0, "seconds": time.perf_counter() - start, "metrics": {},
                "trace": trace.summary(), "extra": {}}
    contrary = item.contrary_pids()
    removed_ids = [r.passage.id for r in result.removed]
    cost, parse, pairs = _rerank_figures(trace)
    totals = trace.totals()
    extra: dict[str, Any] = {"warnings": trace.warnings}
    if generator is not None:
        extra["answer_cached"] = any(call.cached for s in trace.steps if s.stage == "generate"
                                     for call in s.llm_calls)
    return {**record, "prediction": prediction, "choice_index": choice_index,
            "correct": correct, "parse_status": status,
            "prompt_tokens": totals["prompt_tokens"],
            "completion_tokens": totals["completion_tokens"],
            "seconds": time.perf_counter() - start, "metrics": values,
            "trace": trace.summary(), "ranking": ranking,
            "removed": [{"id": r.passage.id, "reason": r.reason,
                         "is_contrary": r.passage.id in contrary} for r in result.removed],
            "detection": {"removed": len(removed_ids),
                          "removed_contrary": len(set(removed_ids) & contrary),
                          "contrary": len(contrary), "pairs": len(pairs),
                          "pairs_with_contrary": sum(bool(set(p) & contrary) for p in pairs)},
            "rerank_parse": parse, "rerank_cost": cost,
            "rerank_steps": [{"name": s.name, "decision": s.decision, "outputs": s.outputs}
                             for s in trace.steps if s.stage == "rerank"],
            "extra": extra}


def summarize_rank_records(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Micro-averaged removal precision/recall, pair hit rate, parse counts and per-query cost
    of the re-ranking over ranking records (errored items excluded)."""
    ok = [r for r in records if r.get("parse_status") != "error" and "detection" in r]
    det = {k: sum(r["detection"][k] for r in ok)
           for k in ("removed", "removed_contrary", "contrary", "pairs", "pairs_with_contrary")}
    parse: dict[str, Any] = {"outputs": 0, "failed": 0, "repaired": 0, "repairs": {}}
    for r in ok:
        for key in ("outputs", "failed", "repaired"):
            parse[key] += r["rerank_parse"][key]
        for kind, n in r["rerank_parse"]["repairs"].items():
            parse["repairs"][kind] = parse["repairs"].get(kind, 0) + n
    n = len(ok)
    return {
        "n": n,
        "detection": {**det,
                      "precision": det["removed_contrary"] / det["removed"] if det["removed"]
                      else None,
                      "recall": det["removed_contrary"] / det["contrary"] if det["contrary"]
                      else None,
                      "pair_hit_rate": det["pairs_with_contrary"] / det["pairs"] if det["pairs"]
                      else None},
        "rerank_parse": parse,
        "rerank_cost_per_query": {k: sum(r["rerank_cost"][k] for r in ok) / n if n else None
                                  for k in ("llm_calls", "prompt_tokens", "completion_tokens",
                                            "seconds")},
    }


def run_rank_eval(spec: EvalSpec, config: Config, out: str | Path, llm: LLM | None,
                  options: RankOptions | None = None, workers: int = 1, progress: bool = True,
                  dataset: Dataset | None = None, ray: RayCluster | None = None
                  ) -> dict[str, Any]:
    """Run (or resume) re-ranker `spec.rerank` on a ranking set into `out`; returns
    metrics.aggregate over all records plus `ranking` (summarize_rank_records). Items run on
    threads sharing `llm`, or on Ray actors with a model each (as faithrag.eval.runner.run_eval)."""
    out = Path(out)
    with run_lock(out):
        return _run_rank_eval(spec, config, out, llm, options or RankOptions(), workers,
                              progress, dataset, ray)


def _run_rank_eval(spec: EvalSpec, config: Config, out: Path, llm: LLM | None,
                   options: RankOptions, workers: int, progress: bool, dataset: Dataset | None,
                   ray: RayCluster | None) -> dict[str, Any]:
    dataset = dataset or load_dataset(spec.dataset, spec.data_dir, spec.split, spec.file,
                                      spec.on_error)
    if dataset.kind != "rank":
        raise ConfigError(f"{dataset.name} is a QA set; this runner evaluates ranking sets.",
                          "Choose a ranking set (kre_conflict_rank, ramdocs_rank).")
    if spec.context_mode != "given":
        raise ConfigError("Ranking sets are evaluated on their own candidates.",
                          "Drop --context retrieval.")
    label = spec.rerank or NO_RERANK
    answering = options.answer_top is not None
    items: list[RankItem] = spec.select(dataset.items)
    model, model_sha = model_identity(config)
    manifest = {
        "dataset": dataset.name, "dataset_sha256": dataset.sha256,
        "dataset_path": str(dataset.path), "split": spec.split,
        **{key: None for key in stage_record(config.pipeline)}, "method": label,
        "rerank": spec.rerank, "model": model, "model_sha256": model_sha,
        "context_mode": "given", "metric": "containment" if answering else None,
        "seed": spec.seed, "limit": spec.limit, "offset": spec.offset, "sweep": spec.sweep,
        "config": config.model_dump(), "code_version": code_version(),
        "platform": platform_identity(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "malformed_lines": [str(e) for e in dataset.errors],
        "kind": "rank", "first_stage": options.first_stage, "answer_top": options.answer_top,
        "answer_method": config.pipeline.method if answering else None,
        "answer_cache": str(options.answer_cache) if answering and options.answer_cache else None,
    }
    write_manifest(out, manifest, _RANK_MANIFEST_KEYS)
    qa = load_qa_versions(items, spec.data_dir, spec.split) if answering else {}
    results = ResultsFile(out / "results.jsonl")
    todo = [item for item in items if item.id not in results.done]
    make_evaluator = partial(_rank_evaluator, spec, config, label, dataset.name, options, qa)

    bar = _progress(len(items), len(items) - len(todo), dataset.name, label, progress)
    try:
        for record in evaluate_items(make_evaluator, todo, llm, config.llm, workers, ray):
            results.append(record)
            if bar is not None:
                done = [r["metrics"].get("ndcg@1") for r in results.records]
                scored = [v for v in done if isinstance(v, (int, float))]
                bar.set_postfix(ndcg1=f"{sum(scored) / max(len(scored), 1):.3f}")
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    wanted = {item.id for item in items}
    records = [r for r in results.records if r["id"] in wanted]
    return {**aggregate(records), "ranking": summarize_rank_records(records)}

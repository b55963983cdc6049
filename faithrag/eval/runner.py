"""Resumable evaluation runs.

A run writes into a run directory (faithrag/eval/run_dir.py): `manifest.json`, what was run, and
`results.jsonl`, appended and fsync'ed as each item finishes (the record schema is in
faithrag/eval/runs.py). Re-running the same command skips the ids already there; a run
killed mid-way loses at most the items in flight, and a line cut by the kill is dropped on
resume. An item that raises is recorded with parse_status "error" and the run goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from faithrag import registry
from faithrag.answers import (
    attack_success,
    containment,
    exact_match,
    f1_score,
    numeric_containment,
    smart_em,
)
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.datasets import Dataset, QAItem, golden_version, load_dataset, two_way_choices
from faithrag.eval.distractors import DistractorPool
from faithrag.eval.executors import RayCluster, evaluate_items
from faithrag.eval.metrics import aggregate, record_correct
from faithrag.eval.run_dir import (
    ResultsFile,
    code_version,
    model_identity,
    platform_identity,
    run_lock,
    stage_record,
    write_manifest,
)
from faithrag.llm.base import LLM
from faithrag.methods.base import Retriever
from faithrag.pipeline import Pipeline
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.types import Passage, Question, Trace

T = TypeVar("T")

FREE_FORM_METRICS = ("containment", "numeric_containment", "smart_em", "em")


@dataclass
class EvalSpec:
    dataset: str
    method: str = "vanilla"
    rerank: str | None = None  # ranking sets: the re-ranker evaluated (QA runs: config's stages)
    limit: int | None = None
    offset: int = 0  # items skipped before the first one evaluated
    seed: int = 0
    context_mode: Literal["given", "retrieval", "golden", "item_retrieval"] = "given"
    # golden: KRE non-conflict; item_retrieval: retrieval over the item's own passages (plus
    # injected distractors), the top retrieval.k go to the method
    metric: str = "containment"  # what "correct" means for free-form answers
    split: str = "dev"
    data_dir: str | None = None
    file: str | None = None
    on_error: Literal["skip", "raise"] = "skip"
    sweep: dict[str, Any] = field(default_factory=dict)  # {"distractors": N}: N injected per item

    def __post_init__(self) -> None:
        if self.metric not in FREE_FORM_METRICS:
            raise ConfigError(f"Unknown metric '{self.metric}'.",
                              f"Choose one of {', '.join(FREE_FORM_METRICS)}.")
        if self.limit is not None and self.limit < 1:
            raise ConfigError("--limit must be >= 1.", "Leave it out to run every item.")
        if self.offset < 0:
            raise ConfigError("--offset must be >= 0.", "Pass the number of items to skip.")
        distractors = self.sweep.get("distractors", 0)
        if isinstance(distractors, bool) or not isinstance(distractors, int) or distractors < 0:
            raise ConfigError(f"distractors must be a whole number >= 0, got {distractors!r}.",
                              "Pass --distractors N.")
        if distractors and self.context_mode not in ("given", "item_retrieval"):
            raise ConfigError("Distractors are injected into each item's own passages.",
                              "Use --context given or --context item_retrieval.")

    def select(self, items: list[T]) -> list[T]:
        """The items this spec evaluates: `limit` items from `offset` on (all when no limit)."""
        if self.offset and self.offset >= len(items):
            raise ConfigError(f"--offset {self.offset} skips every item: the set has {len(items)}.",
                              "Pass a smaller --offset.")
        return items[self.offset: self.offset + self.limit if self.limit else None]


@dataclass
class Prepared:
    question: Question
    passages: list[Passage] | None  # None: answer through the retriever
    gold_index: int | None
    item: QAItem  # the version of the item that was asked (golden mode: its golden version)


def prepare(item: QAItem, method: str, seed: int, context_mode: str) -> Prepared | None:
    """The question and evidence an item gives a method; None when the item has no version the
    method can answer (a free-form item without a usable two-way choice for a choice method)."""
    if context_mode == "golden":
        golden = golden_version(item)
        if golden is None:
            return None
        item = golden
    passages = None if context_mode == "retrieval" else item.passages()
    if item.choices is not None:
        return Prepared(item.as_question(), passages, item.answer_idx, item)
    if method in registry.choice_methods():  # a free-form item becomes a two-way choice
        two_way = two_way_choices(item, seed)
        if two_way is None:
            return None
        return Prepared(Question(item.question, item.id, two_way.choices), passages,
                        two_way.answer_idx, item)
    return Prepared(Question(item.question, item.id), passages, None, item)


def score_item(prepared: Prepared, prediction: str, choice_index: int | None,
               metric: str) -> tuple[bool, dict[str, Any]]:
    item = prepared.item
    if prepared.gold_index is not None:
        correct = choice_index == prepared.gold_index
        return correct, {"accuracy": int(correct)}
    golds = item.answers
    values = {
        "containment": int(containment(prediction, golds)),
        "numeric_containment": int(numeric_containment(prediction, golds)),
        "smart_em": int(smart_em(prediction, golds)),
        "em": int(exact_match(prediction, golds)),
        "f1": f1_score(prediction, golds),
    }
    if item.parametric_answer:  # answered from memory instead of the context
        values["parametric"] = int(containment(prediction, [item.parametric_answer]))
    target = item.meta.get("target_incorrect_answer")
    if target:  # one target answer, or a list of them (any counts)
        targets = [target] if isinstance(target, str) else target
        values["attack_success"] = int(any(attack_success(prediction, t) for t in targets))
    return bool(values[metric]), values


def run_eval(spec: EvalSpec, config: Config, out: str | Path, llm: LLM | None,
             build_pipeline: Callable[[Config, LLM, Retriever | None], Pipeline],
             workers: int = 1, progress: bool = True, dataset: Dataset | None = None,
             ray: RayCluster | None = None) -> dict[str, Any]:
    """Run (or resume) `spec` into `out`; returns the aggregate figures of all records.

    Items run on `workers` threads sharing `llm`, or, given `ray`, on Ray actors that each load
    their own model (`llm` is then unused and may be None)."""
    out = Path(out)
    with run_lock(out):
        return _run_eval(spec, config, out, llm, build_pipeline, workers, progress, dataset, ray)


def _run_eval(spec: EvalSpec, config: Config, out: Path, llm: LLM | None,
              build_pipeline: Callable[[Config, LLM, Retriever | None], Pipeline],
              workers: int, progress: bool, dataset: Dataset | None,
              ray: RayCluster | None) -> dict[str, Any]:
    dataset = dataset or load_dataset(spec.dataset, spec.data_dir, spec.split, spec.file,
                                      spec.on_error)
    if dataset.kind != "qa":
        raise ConfigError(f"{dataset.name} is a ranking set; this runner evaluates QA sets.",
                          "Choose a QA dataset.")
    items = spec.select(dataset.items)
    model, model_sha = model_identity(config)
    write_manifest(out, {
        "dataset": dataset.name, "dataset_sha256": dataset.sha256, "dataset_path": str(dataset.path),
        "split": spec.split, **stage_record(config.pipeline), "model": model, "model_sha256": model_sha, "context_mode": spec.context_mode,
        "metric": spec.metric, "seed": spec.seed, "limit": spec.limit, "offset": spec.offset,
        "sweep": spec.sweep, "config": config.model_dump(), "code_version": code_version(),
        "platform": platform_identity(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "malformed_lines": [str(e) for e in dataset.errors],
    })
    results = ResultsFile(out / "results.jsonl")
    todo = [item for item in items if item.id not in results.done]

    make_evaluator = partial(QAItemEvaluator, spec, config, dataset, build_pipeline)
    bar = _progress(len(items), len(items) - len(todo), dataset.name, spec.method, progress)
    try:
        for record in evaluate_items(make_evaluator, todo, llm, config.llm, workers, ray):
            results.append(record)
            if bar is not None:
                scored = [c for c in map(record_correct, results.records) if c is not None]
                bar.set_postfix(acc=f"{sum(scored) / max(len(scored), 1):.3f}",
                                failed=sum(r["parse_status"] != "ok" for r in results.records))
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    wanted = {item.id for item in items}
    return aggregate([r for r in results.records if r["id"] in wanted])


class QAItemEvaluator:
    """One QA item in, its record out, through a pipeline around `llm` (built once per model)."""

    def __init__(self, spec: EvalSpec, config: Config, dataset: Dataset,
                 build_pipeline: Callable[[Config, LLM, Retriever | None], Pipeline], llm: LLM):
        self.spec, self.config, self.dataset, self.llm = spec, config, dataset, llm
        self.build_pipeline = build_pipeline
        retriever = _set_retriever(dataset, config) if spec.context_mode == "retrieval" else None
        self.pipeline = build_pipeline(config, llm, retriever)
        self.injector = DistractorPool(dataset) if spec.sweep.get("distractors") else None

    def __call__(self, item: QAItem) -> dict[str, Any]:
        record: dict[str, Any] = {"id": item.id, "dataset": self.dataset.name,
                                  "method": self.spec.method, "gold": item.answers, "error": None}
        start = time.perf_counter()
        trace = Trace()
        try:
            return self._evaluate(item, record, trace)
        except Exception as exc:  # noqa: BLE001 (one bad item must not stop the run)
            totals = trace.totals()  # the steps that ran before the error stay in the record
            return {**record, "prediction": None, "correct": None, "parse_status": "error",
                    "error": f"{type(exc).__name__}: {exc}",
                    "prompt_tokens": totals["prompt_tokens"],
                    "completion_tokens": totals["completion_tokens"],
                    "seconds": time.perf_counter() - start, "metrics": {},
                    "trace": trace.summary() if trace.steps else {},
                    "extra": {"warnings": trace.warnings} if trace.warnings else {}}

    def _evaluate(self, item: QAItem, record: dict[str, Any], trace: Trace) -> dict[str, Any]:
        spec, config = self.spec, self.config
        start = time.perf_counter()
        prepared = prepare(item, spec.method, spec.seed, spec.context_mode)
        if prepared is None:
            return {**record, "prediction": None, "correct": None, "parse_status": "skipped",
                    "error": "no golden version" if spec.context_mode == "golden" else
                    "no two-way choice (parametric answer missing or equal to gold)",
                    "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0,
                    "metrics": {}, "trace": {}, "extra": {}}
        record["gold"] = prepared.item.answers
        passages = prepared.passages
        injected = self.injector.select(prepared.item, spec.sweep["distractors"]) \
            if self.injector else []
        if passages is not None:
            passages = passages + injected
        if spec.context_mode == "item_retrieval":
            item_retriever = InMemoryRetriever(passages, mode=config.retrieval.mode)
            result = self.build_pipeline(config, self.llm, item_retriever).run(
                prepared.question, trace=trace)
        else:
            result = self.pipeline.run(prepared.question, passages, trace)
        answer = result.answer
        correct, values = score_item(prepared, answer.text, answer.choice_index, spec.metric)
        if answer.parse_status != "ok":  # unread output answers nothing, whatever it contains
            correct, values = False, {name: 0 for name in values}
        totals = result.trace.totals()
        return {**record,
                "prediction": answer.text, "choice_index": answer.choice_index,
                "choices": prepared.question.choices, "gold_index": prepared.gold_index,
                "correct": correct, "parse_status": answer.parse_status,
                "prompt_tokens": totals["prompt_tokens"],
                "completion_tokens": totals["completion_tokens"],
                "seconds": time.perf_counter() - start, "metrics": values,
                "trace": result.trace.summary(),
                "extra": {"raw": answer.raw[:2000], "reason": answer.reason,
                          "warnings": result.trace.warnings,
                          "removed": [r.passage.id for r in result.removed], **answer.meta,
                          **_injection_record(injected, result.passages)}}


def _injection_record(injected: list[Passage], evidence: list[Passage]) -> dict[str, Any]:
    if not injected:
        return {}
    ids = {p.id for p in injected}
    return {"injected": [p.meta["from"] for p in injected],
            "injected_in_evidence": sum(p.id in ids for p in evidence)}


def _progress(total: int, initial: int, dataset: str, method: str, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc=f"{dataset}/{method}", unit="item",
                dynamic_ncols=True)


def _set_retriever(dataset: Dataset, config: Config) -> Retriever:
    """A retriever over every passage of the set (retrieval mode)."""
    from faithrag.retrieval.retriever import InMemoryRetriever
    return InMemoryRetriever(dataset.corpus(), mode=config.retrieval.mode)

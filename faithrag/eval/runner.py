"""Resumable evaluation runs.

A run directory holds `manifest.json` (what was run: dataset and its sha256, method and config,
model and its sha256, code version) and `results.jsonl`, appended and fsync'ed as each item
finishes (the record schema is in faithrag/eval/report.py). Re-running the same command skips
the ids already there; a run killed mid-way loses at most the items in flight, and a line cut
by the kill is dropped on resume. An item that raises is recorded with parse_status "error" and
the run goes on.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache, partial
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, TypeVar

from faithrag import __version__
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval import metrics as M
from faithrag.eval.datasets import Dataset, QAItem, golden_version, load_dataset, two_way_choices
from faithrag.eval.distractors import DistractorPool
from faithrag.eval.executors import RayCluster, evaluate_items
from faithrag.llm.base import LLM
from faithrag.llm.models import PRESETS, sha256_of
from faithrag.methods.base import Retriever
from faithrag.pipeline import Pipeline
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.types import Passage, Question, Trace

T = TypeVar("T")

# Methods that answer by picking an option; on a free-form conflict set they get the documented
# two-way choice (context answer vs parametric answer, faithrag.eval.datasets.two_way_choices).
CHOICE_METHODS = {"cot_json", "cot_json_scored", "choice_scoring", "csrag", "csrag_choices",
                  "csrag_json_scored"}
FREE_FORM_METRICS = ("containment", "smart_em", "em")


@dataclass
class EvalSpec:
    dataset: str
    method: str = "vanilla"
    rerank: str | None = None
    verify: str | None = None
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


def code_version() -> str:
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                              capture_output=True, text=True, timeout=5, check=False)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=here.parent,
                               capture_output=True, text=True, timeout=5, check=False)
        if head.returncode == 0:
            return f"{__version__}+g{head.stdout.strip()}" + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return __version__


@cache
def platform_identity() -> str:
    """The CPU and llama.cpp build this process computes on. Greedy decoding is exact on one
    machine and build, but not across them: other SIMD kernels round differently, so a near-tie
    in the logits can fall the other way and a long reply can differ (BENCHMARKS.md, section
    "Reproducibility across machines"). A run that resumes elsewhere records both."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    cpu = cpu or platform.processor() or platform.machine()
    try:
        import llama_cpp  # the pinned build, whatever the backend of this run
        features = " ".join(part.split("=")[0].strip()
                            for part in llama_cpp.llama_print_system_info().decode().split("|")
                            if part.strip().endswith("= 1"))
        return f"{cpu}; llama-cpp-python {metadata.version('llama_cpp_python')}; {features}"
    except (ImportError, metadata.PackageNotFoundError, AttributeError, UnicodeDecodeError):
        return f"{cpu}; llama-cpp-python not installed"


def model_identity(config: Config) -> tuple[str, str | None]:
    """(model name, sha256 of its weights when they are a local file)."""
    if config.llm.backend in ("llamacpp", "transformers"):
        if config.llm.model in PRESETS:
            return config.llm.model, PRESETS[config.llm.model].sha256
        path = Path(config.llm.model)
        return config.llm.model, sha256_of(path) if path.is_file() else None
    return f"{config.llm.backend}:{config.llm.model}", None


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
    if method in CHOICE_METHODS:
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
        "containment": int(M.containment(prediction, golds)),
        "smart_em": int(M.smart_em(prediction, golds)),
        "em": int(M.exact_match(prediction, golds)),
        "f1": M.f1_score(prediction, golds),
    }
    if item.parametric_answer:  # answered from memory instead of the context
        values["parametric"] = int(M.containment(prediction, [item.parametric_answer]))
    target = item.meta.get("target_incorrect_answer")
    if target:  # one target answer, or a list of them (any counts)
        targets = [target] if isinstance(target, str) else target
        values["attack_success"] = int(any(M.attack_success(prediction, t) for t in targets))
    return bool(values[metric]), values


class ResultsFile:
    """Append-only JSONL of finished items; repairs a line cut by a crash. An id's last record
    is the one that counts."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._by_id: dict[str, dict[str, Any]] = {}
        if path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) != len(data):  # the last write was interrupted
            with open(self.path, "r+b") as f:
                f.truncate(len(complete))
        for line in complete.splitlines():
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a corrupt line is re-run, not trusted
                if isinstance(record, dict) and "id" in record:
                    self._by_id[record["id"]] = record

    @property
    def records(self) -> list[dict[str, Any]]:
        return list(self._by_id.values())

    @property
    def done(self) -> set[str]:
        """Ids not to run again: an item that ended in an error (a dead server, a crash in a
        stage) is retried when the run resumes."""
        return {i for i, r in self._by_id.items() if r.get("parse_status") != "error"}

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            self._by_id[record["id"]] = record


_MANIFEST_KEYS = ("dataset", "dataset_sha256", "split", "method", "rerank", "verify", "model",
                  "model_sha256", "context_mode", "metric", "seed", "offset", "config", "sweep")
# settings that change speed, never results: a run may resume with different values
_SPEED_ONLY = ("n_threads", "timeout", "max_retries", "concurrency")
# keys that later code added to the manifest, with the value that older runs had implicitly
_ADDED_KEYS = {"offset": 0}


def _comparable(manifest: dict[str, Any], key: str) -> Any:
    value = manifest.get(key, _ADDED_KEYS.get(key))
    if key == "config" and isinstance(value, dict):
        llm = {k: v for k, v in value.get("llm", {}).items() if k not in _SPEED_ONLY}
        value = {**value, "llm": llm}
    return value


def _with_defaults(old: Any, defaults: Any) -> Any:
    """`old` with the settings it lacks filled in from `defaults`: a setting added by newer code
    had its default value in the old run, so resuming with the default is no change, and
    resuming with another value is one."""
    if not (isinstance(old, dict) and isinstance(defaults, dict)):
        return old
    return {**defaults, **{k: _with_defaults(v, defaults.get(k)) for k, v in old.items()}}


def _changes(key: str, old: Any, new: Any) -> list[str]:
    """`key: old → new` for every leaf setting that differs (dotted keys inside dicts)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [change for k in sorted(set(old) | set(new), key=str)
                for change in _changes(f"{key}.{k}", old.get(k), new.get(k))]
    return [] if old == new else [f"{key}: {old!r} → {new!r}"]


def _write_manifest(out: Path, manifest: dict[str, Any],
                    extra_keys: tuple[str, ...] = ()) -> None:
    """Write `out`'s manifest; a resume must match the old one on _MANIFEST_KEYS + extra_keys."""
    path = out / "manifest.json"
    if path.exists():
        old = json.loads(path.read_text())
        old_filled = {**old, "config": _with_defaults(old.get("config"), Config().model_dump())}
        changed = [change for k in _MANIFEST_KEYS + extra_keys
                   for change in _changes(k, _comparable(old_filled, k), _comparable(manifest, k))]
        if changed:
            raise ConfigError(
                f"{out} holds a run with different settings: {'; '.join(changed)}.",
                "Use another --out directory, or delete this one to start over.")
        history = {}
        for key in ("code_version", "platform"):  # where each part of the records came from
            seen = old.get(f"{key}s") or [old.get(key)]
            history[f"{key}s"] = seen if manifest[key] == seen[-1] else [*seen, manifest[key]]
        manifest = {**old, "limit": manifest["limit"], "resumed": old.get("resumed", 0) + 1,
                    "code_version": manifest["code_version"], "platform": manifest["platform"],
                    **history}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    os.replace(tmp, path)


@contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold `out` for one process: a second run into the same directory would compute the same
    items twice. The OS drops the lock when the holder dies, so a crash never leaves it stale."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"Another process is running into {out}.",
                              "Wait for it to finish, or use another --out directory.") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
    _write_manifest(out, {
        "dataset": dataset.name, "dataset_sha256": dataset.sha256, "dataset_path": str(dataset.path),
        "split": spec.split, "method": spec.method, "rerank": spec.rerank, "verify": spec.verify,
        "model": model, "model_sha256": model_sha, "context_mode": spec.context_mode,
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
                scored = [c for c in map(M.record_correct, results.records) if c is not None]
                bar.set_postfix(acc=f"{sum(scored) / max(len(scored), 1):.3f}",
                                failed=sum(r["parse_status"] != "ok" for r in results.records))
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    wanted = {item.id for item in items}
    return M.aggregate([r for r in results.records if r["id"] in wanted])


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
    passages = [p for item in dataset.items for p in item.passages()]
    unique = list({p.text: p for p in passages}.values())
    return InMemoryRetriever(unique, mode=config.retrieval.mode)

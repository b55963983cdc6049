"""The mixed conflict suite: one run that answers every slice (faithrag/eval/suite_slices.py)
with plain RAG and with the configured pipeline, item by item, on the same evidence.

`faithrag eval --suite conflicts --out DIR` runs it. Per item, both ways run on the same
passages (given directly: no retrieval step), which way goes first alternating from item to
item; each way has a model instance of its own, so neither reuses a prompt the other left in
the model's cache. Plain RAG is `configure(config, plain=True)` (registry.PLAIN_RAG); the
pipeline is `config` as given (the defaults, unless stage flags say otherwise). Caches are off
(`use_cache = false`) so that times compare.

Records (OUT/records.jsonl, one per item x way, appended and fsynced; a re-run skips what is
there, so a run stopped at any point resumes) hold no gold answer, only what is derived from
one: `correct` (the slice's criterion), `informed` (correct, or every gold answer stated and
any wrong one only as a reading of a surfaced conflict, its sources named), `attacked` (a
hostile slice's target stated), `surfaced` (the answer lists the readings), `flagged` (the
answer keeps one reading and names the passages that disagree; it is scored on the reading it
keeps), the answer and the answer before the policy, conflicts and removed passages, wall
seconds and LLM calls.
OUT/suite.json records the slices, seed, per-slice count, skip and both configurations; a resume
with other settings is refused. `shard=(i, n)` runs every n-th item from the i-th (1-based),
so n processes can share one OUT; each holds a lock of its own and they append under a
common one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.run_dir import SPEED_ONLY, code_version
from faithrag.eval.suite_slices import (
    SLICES,
    SuiteItem,
    check_slices,
    gold_given,
    sample_items,
    wrong_given,
)
from faithrag.llm.base import LLM
from faithrag.pipeline import Pipeline, Result, configure

SUITES = {"conflicts": tuple(SLICES)}  # `--suite NAME`: its slices
WAYS = ("plain", "pipeline")
RECORDS = "records.jsonl"
MANIFEST = "suite.json"


def score(item: SuiteItem, result: Result) -> dict[str, Any]:
    """The figures of one answer (see the module docstring)."""
    answer = result.answer
    text, choice = answer.text, answer.choice_index
    surfaced = bool(answer.meta.get("readings_listed"))
    flagged = bool(answer.meta.get("conflicts")) and not surfaced
    if flagged:  # the kept answer is what it states: the flag adds passage ids, no reading
        text = answer.meta["resolved_answer"]
    golds = gold_given(item, text, choice)
    wrong = wrong_given(item, text)
    return {"correct": golds and not wrong,
            "informed": golds and (not wrong or surfaced),
            "attacked": wrong if item.slice.endswith("_hostile") else None,
            "surfaced": surfaced, "flagged": flagged}


def record_of(item: SuiteItem, way: str, result: Result, seconds: float) -> dict[str, Any]:
    totals = result.trace.totals()
    return {"id": f"{item.slice}/{item.id}/{way}", "slice": item.slice,
            "kind": SLICES[item.slice].kind, "item": item.id, "way": way,
            **score(item, result), "answer": result.answer.text,
            "choice_index": result.answer.choice_index,
            "resolved_answer": result.answer.meta.get("resolved_answer", result.answer.text),
            "parse_status": result.answer.parse_status,
            "passages": [p.id for p in item.passages],
            "removed": [[r.passage.id, r.reason] for r in result.removed],
            "conflicts": [c.kind for c in result.conflicts],
            "checks": {c.kind: c.status for c in result.conflict_checks},
            "seconds": round(seconds, 4), "llm_calls": int(totals["llm_calls"]),
            "prompt_tokens": int(totals["prompt_tokens"]),
            "warnings": [w for s in result.trace.steps for w in s.warnings]}


def read_records(out: Path) -> list[dict[str, Any]]:
    """The records of `out`, the last one per id (a line cut by a crash is skipped)."""
    path = out / RECORDS
    if not path.is_file():
        return []
    by_id: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "id" in record:
            by_id[record["id"]] = record
    return list(by_id.values())


def suite_configs(config: Config) -> dict[str, Config]:
    """Plain RAG and the configured pipeline, caches off."""
    pipeline = configure(config, use_cache=False)
    return {"plain": configure(pipeline, plain=True), "pipeline": pipeline}


def _manifest(suite: str, slices: Sequence[str], per_slice: int, seed: int, skip: int,
              configs: dict[str, Config]) -> dict[str, Any]:
    return {"suite": suite, "slices": list(slices), "per_slice": per_slice, "seed": seed,
            **({"skip": skip} if skip else {}),
            "configs": {way: c.model_dump(mode="json") for way, c in configs.items()}}


def _comparable(key: str, value: Any) -> Any:
    """A manifest value without the settings that change speed, never results (threads,
    timeouts, retries), so that a run may resume with other values of them."""
    if key != "configs" or not isinstance(value, dict):
        return value
    return {way: {**config, "llm": {k: v for k, v in config.get("llm", {}).items()
                                    if k not in SPEED_ONLY}}
            for way, config in value.items()}


def _write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    path = out / MANIFEST
    if path.is_file():
        old = json.loads(path.read_text())
        changed = [key for key in manifest
                   if _comparable(key, old.get(key)) != _comparable(key, manifest[key])]
        if changed:
            raise ConfigError(f"{out} holds a suite run with other {', '.join(changed)}.",
                              "Use another --out directory, or delete this one to start over.")
        manifest = {**old, "code_versions": list(dict.fromkeys(
            [*old.get("code_versions", []), code_version()]))}
    else:
        manifest = {**manifest, "code_versions": [code_version()]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=2))
    os.replace(tmp, path)


def run_suite(config: Config, out: str | Path, *, suite: str = "conflicts",
              slices: Sequence[str] | None = None, per_slice: int = 30, seed: int = 0,
              skip: int = 0, data_dir: str | None = None, shard: tuple[int, int] = (1, 1),
              limit: int | None = None, llms: dict[str, LLM] | None = None,
              load: Callable[[Config], LLM] | None = None,
              progress: Callable[[str], None] = lambda line: None) -> list[dict[str, Any]]:
    """Run (or resume) the suite into `out` and return every record there. `llms` gives each
    way its model (tests: one FakeLLM for both); otherwise `load` builds one per way from its
    configuration. `skip` leaves out the items a run with `per_slice=skip` sampled
    (suite_slices.sample_items). `limit` stops after that many items of this shard.
    ConfigError before any model loads for an unknown suite or slice, a bad shard or skip,
    or `out` holding another run."""
    if suite not in SUITES:
        raise ConfigError(f"Unknown suite {suite!r}", f"--suite takes {', '.join(SUITES)}.")
    names = check_slices(list(slices) if slices else list(SUITES[suite]))
    index, count = shard
    if not 1 <= index <= count:
        raise ConfigError(f"Bad shard {index}/{count}", "--shard takes I/N with 1 <= I <= N.")
    if not 0 <= skip < per_slice:
        raise ConfigError(f"Bad skip {skip} for {per_slice} items per slice",
                          "--skip takes 0 <= N < --per-slice.")
    configs = suite_configs(config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(out / f".shard-{index}-of-{count}.lock", timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ConfigError(f"Another process is running shard {index}/{count} into {out}.",
                          "Wait for it, or run another --shard.") from None
    try:
        _write_manifest(out, _manifest(suite, names, per_slice, seed, skip, configs))
        items = sample_items(names, per_slice, seed, data_dir, skip)[index - 1::count][:limit]
        done = {r["id"] for r in read_records(out) if r.get("parse_status") != "error"}
        todo = [(n, item) for n, item in enumerate(items)
                if any(f"{item.slice}/{item.id}/{way}" not in done for way in WAYS)]
        if todo:
            models = llms or {way: (load or _load)(configs[way]) for way in WAYS}
            pipelines = {way: Pipeline.from_parts(configs[way], models[way]) for way in WAYS}
            for position, (number, item) in enumerate(todo, 1):
                ways = WAYS if number % 2 == 0 else WAYS[::-1]
                for way in ways:
                    if f"{item.slice}/{item.id}/{way}" in done:
                        continue
                    _append(out, _run_one(item, way, pipelines[way]))
                progress(f"[{position}/{len(todo)}] {item.slice} {item.id}")
    finally:
        lock.release()
    return read_records(out)


def _load(config: Config) -> LLM:
    from faithrag.llm import load_llm

    return load_llm(config.llm)


def _run_one(item: SuiteItem, way: str, pipeline: Pipeline) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        result = pipeline.run(item.question, item.passages)
    except Exception as error:  # noqa: BLE001 (recorded, retried on resume, never scored)
        return {"id": f"{item.slice}/{item.id}/{way}", "slice": item.slice, "item": item.id,
                "way": way, "parse_status": "error",
                "error": f"{type(error).__name__}: {error}"}
    return record_of(item, way, result, time.perf_counter() - started)


def _append(out: Path, record: dict[str, Any]) -> None:
    line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
    with FileLock(out / ".records.lock"), open(out / RECORDS, "a", encoding="utf-8") as sink:
        sink.write(line)
        sink.flush()
        os.fsync(sink.fileno())

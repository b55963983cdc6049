"""The run directory of an evaluation run: its manifest, its lock and its results file.

A run directory holds ``manifest.json`` (what was run and where the numbers come from: dataset
and its sha256, method and config, model and its sha256, code version, platform) and
``results.jsonl``, one record per finished item (the record schema is in
faithrag/eval/runs.py).

- ``write_manifest``: writes the manifest; a resumed run must match the old manifest on every
  setting that changes results (speed-only settings and keys that newer code added with their
  old implicit value are allowed to differ); the code versions and platforms a run went through
  are kept.
- ``ResultsFile``: appends records and fsyncs each one, drops a line cut by a crash on reading,
  and says which ids are done (an id's last record counts; an item that ended in an error is
  not done).
- ``run_lock``: holds the directory for one process.
- ``code_version``, ``platform_identity``, ``model_identity``: the provenance a manifest records.

Example::

    with run_lock(out):
        write_manifest(out, manifest)
        results = ResultsFile(out / "results.jsonl")
        for item in items:
            if item.id not in results.done:
                results.append(evaluate(item))
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from faithrag import __version__, registry
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.llm.models import PRESETS, sha256_of


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


_STAGE_KEYS = tuple(entry.key for entry in registry.KINDS)  # "method", "rerank", ...
_MANIFEST_KEYS = ("dataset", "dataset_sha256", "split", *_STAGE_KEYS, "model", "model_sha256",
                  "context_mode", "metric", "seed", "offset", "config", "sweep")
# settings that change speed, never results: a run may resume with different values
SPEED_ONLY = ("n_threads", "timeout", "max_retries", "concurrency")
# keys that later code added to the manifest, with the value that older runs had implicitly
_ADDED_KEYS = {"offset": 0}


def stage_names(manifest: dict[str, Any]) -> dict[str, str | None]:
    """The stage of each kind (registry.KINDS) a run's manifest records, by kind; a kind's key
    missing from an older manifest (detect) is read from its configuration's `pipeline`."""
    config = manifest.get("config")
    pipeline = config.get("pipeline") if isinstance(config, dict) else None
    pipeline = pipeline if isinstance(pipeline, dict) else {}
    return {entry.kind: manifest[entry.key] if entry.key in manifest
            else pipeline.get(entry.key) for entry in registry.KINDS}


def stage_record(pipeline: Any) -> dict[str, str | None]:
    """The manifest's stage keys (one per kind of registry.KINDS) of a run of `pipeline`
    (a PipelineConfig)."""
    return {entry.key: getattr(pipeline, entry.key) for entry in registry.KINDS}


def _comparable(manifest: dict[str, Any], key: str) -> Any:
    if key in _STAGE_KEYS:
        return stage_names(manifest)[registry.KINDS[_STAGE_KEYS.index(key)].kind]
    value = manifest.get(key, _ADDED_KEYS.get(key))
    if key == "config" and isinstance(value, dict):
        llm = {k: v for k, v in value.get("llm", {}).items() if k not in SPEED_ONLY}
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


def write_manifest(out: Path, manifest: dict[str, Any],
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
    items twice. The lock is the OS's own on `out/.lock` (filelock: flock on POSIX, msvcrt on
    Windows), so the OS drops it when the holder dies and a crash never leaves it stale."""
    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(out / ".lock", timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ConfigError(f"Another process is running into {out}.",
                          "Wait for it to finish, or use another --out directory.") from None
    try:
        yield
    finally:
        lock.release()

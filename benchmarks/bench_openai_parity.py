"""Does the OpenAI-compatible backend answer as the embedded one? Same GGUF, same items, each stage.

The script starts `python -m llama_cpp.server` on the model (loopback, flash attention as the
embedded backend runs it, the same context window and threads), loads the same model in process,
and runs every stage of STAGES on the same items through both backends, alternating which goes
first item by item so that load on the machine falls on both alike. Items come from one
hostile-retrieval setting (faithrag/eval/hostile_settings.py; default KRE-MuSiQue, hostile, k = 3:
the misleading passage on top of two BM25 hits over the clean corpus), so every stage meets a
real conflict; the stages that take options get two: the golden answer and the misleading
context's answer. Caches are off (`use_cache = false`, `csrag.cache_facts = false`; the server's
prompt cache and the backend's remembered option log-probs are cleared before each stage's run,
as the embedded backend starts every call afresh), decoding is greedy.

Each record (one item x stage x backend, appended to --out/records.jsonl; re-running resumes):
answer, option probabilities (stages that score options), parse status, LLM calls, prompt and
completion tokens, seconds. The summary (printed, and --out/summary.json) gives per stage:
items both backends answered, answer agreement, the largest difference of an option
probability, calls per item on each backend, the seconds ratio (sum over items, OpenAI /
embedded), and how often each backend refused (the OpenAI backend refuses to score options it
cannot score exactly, e.g. options of several tokens under the CSRAG bias).

    python benchmarks/bench_openai_parity.py --model default --limit 50 --out runs/parity
    python benchmarks/bench_openai_parity.py --stages vanilla choice_scoring csrag_choices \
      --set csrag.enhance_context=false --limit 20 --out runs/parity
    python benchmarks/bench_openai_parity.py --stages cfrag --first 25 --out runs/parity-cfrag-2
    python benchmarks/bench_openai_parity.py --summary-only --out runs/parity
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from faithrag import FaithragError, Pipeline
from faithrag.answers import normalize_answer
from faithrag.cli.common import parse_set_options
from faithrag.eval.hostile import HostileRetriever
from faithrag.eval.hostile_runner import build_trusted_index
from faithrag.eval.hostile_settings import HostileSetting, build_setting
from faithrag.llm import load_llm
from faithrag.llm.base import LLM
from faithrag.llm.models import resolve_model
from faithrag.llm.openai import OpenAICompatLLM
from faithrag.pipeline import configure
from faithrag.retrieval import InMemoryRetriever
from faithrag.retrieval.retriever import Retriever
from faithrag.types import Question

# stage -> (pipeline settings, whether it answers from two options)
STAGES: dict[str, tuple[dict[str, str], bool]] = {
    "vanilla": ({"method": "vanilla"}, False),
    "cot_json": ({"method": "cot_json"}, True),
    "choice_scoring": ({"method": "choice_scoring"}, True),
    "csrag_choices": ({"method": "csrag_choices"}, True),
    "csrag_json_scored": ({"method": "csrag_json_scored"}, True),
    "crossval": ({"method": "vanilla", "rerank": "crossval"}, False),
    "antisyco": ({"method": "vanilla", "verify": "antisyco"}, False),
    "cfrag": ({"method": "cfrag"}, False),
}
BACKENDS = ("embedded", "openai")
SERVED_NAME = "parity"  # the model name the server answers to


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVERS = ("llama-cpp-python", "llama-server")


def server_command(kind: str, gguf: Path, n_ctx: int, threads: int, port: int,
                   binary: str | None) -> list[str]:
    """The command that serves `gguf` on loopback as the embedded backend runs it (flash
    attention, the same context window and threads). llama-server: one slot and no prompt
    cache in RAM, so a request finds in its cache only what the previous request left."""
    if kind == "llama-cpp-python":
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host",
                "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads",
                str(threads), "--n_threads_batch", str(threads), "--flash_attn", "True",
                "--verbose", "False", "--model_alias", SERVED_NAME]
    if not binary:
        raise SystemExit("--server llama-server needs its binary: --llama-server PATH or "
                         "FAITHRAG_LLAMA_SERVER (scripts/build_llama_server.sh builds it)")
    return [binary, "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
            "--ctx-size", str(n_ctx), "--threads", str(threads), "--threads-batch", str(threads),
            "--flash-attn", "on", "--parallel", "1", "--cache-ram", "0", "--no-webui",
            "--alias", SERVED_NAME]


@contextmanager
def served_model(kind: str, gguf: Path, n_ctx: int, threads: int, log_path: Path,
                 binary: str | None = None) -> Iterator[str]:
    """`kind` of SERVERS serving `gguf` (loopback); yields its base URL, stops it afterwards."""
    port = free_port()
    cmd = server_command(kind, gguf, n_ctx, threads, port, binary)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{kind} exited ({proc.returncode}); see {log_path}")
            try:
                ready = "/v1/models" if kind == "llama-cpp-python" else "/health"
                if httpx.get(f"http://127.0.0.1:{port}{ready}", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} not ready after 300 s; see {log_path}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def start_afresh(llm: OpenAICompatLLM, model: str = SERVED_NAME) -> None:
    """Before a stage's run over HTTP: `llm` forgets the option log-probs it remembers, and
    llama-cpp-python's server is left with a one-token prompt in its cache (it reuses the prefix
    a request shares with the previous one). The embedded backend keeps nothing across calls;
    without this a stage over HTTP would reuse what the previous stage on the same question
    left (choice_scoring's options, scored again by csrag_choices)."""
    llm.forget_scores()
    httpx.post(f"{llm.base_url}/completions", json={"model": model, "prompt": "\n",
                                                    "max_tokens": 1, "temperature": 0.0,
                                                    "cache_prompt": False},
               timeout=60).raise_for_status()


def item_choices(setting: HostileSetting, item: Any) -> list[str] | None:
    """The golden answer and the misleading context's answer, in an order fixed by the item id;
    None when the two are the same after normalisation."""
    gold, targets = item.answers[0], setting.targets(item)
    if not targets or normalize_answer(gold) == normalize_answer(targets[0]):
        return None
    pair = [gold, targets[0]]
    flip = int(hashlib.sha256(item.id.encode()).hexdigest(), 16) % 2
    return pair[::-1] if flip else pair


def run_stage(pipeline: Pipeline, question: Question) -> dict[str, Any]:
    """The stage's answer and costs; a backend that refuses to score (FaithragError, e.g. options
    of several tokens under a bias over HTTP) is recorded as `refused` with its message."""
    start = time.perf_counter()
    try:
        result = pipeline.run(question)
    except FaithragError as exc:
        return {"refused": exc.message, "seconds": round(time.perf_counter() - start, 3)}
    seconds = time.perf_counter() - start
    totals = result.trace.totals()
    probabilities = result.answer.meta.get("choice_probabilities")
    return {"answer": result.answer.text, "choice_index": result.answer.choice_index,
            "parse_status": result.answer.parse_status,
            "probabilities": list(probabilities.values()) if probabilities else None,
            "decision": result.answer.meta.get("decision"),
            "llm_calls": totals["llm_calls"], "prompt_tokens": totals["prompt_tokens"],
            "completion_tokens": totals["completion_tokens"], "seconds": round(seconds, 3)}


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Case:
    """One question of the benchmark; `choices` (two options) for the stages that take them."""

    id: str
    question: str
    choices: list[str] | None


def setting_cases(setting: HostileSetting, limit: int) -> list[Case]:
    return [Case(item.id, item.question, item_choices(setting, item))
            for item in list(setting.dataset)[:limit]]


def setting_retriever(setting: HostileSetting) -> HostileRetriever:
    """BM25 over the setting's clean corpus, with each question's poison put on top."""
    return HostileRetriever(InMemoryRetriever(setting.dataset.corpus(), mode="bm25"),
                            setting.poison)


def run(llms: dict[str, LLM], cases: list[Case], retriever: Retriever, kb: str,
        stages: list[str], k: int, out: Path, progress: Callable[[str], None],
        before: dict[str, Callable[[], None]] | None = None, **settings: Any) -> None:
    """Append one record per (case, stage, backend) not yet in out/records.jsonl; `before`
    holds, per backend, what to call before each of its stage runs (untimed); `settings` are
    Pipeline.from_config keywords applied to every stage (e.g. csrag__paraphrase_tokens)."""
    records_path = out / "records.jsonl"
    done = {(r["item"], r["stage"], r["backend"]) for r in read_records(records_path)}
    base = configure(None, plain=True, k=k, use_cache=False, csrag__cache_facts=False,
                     antisyco__kb=kb, **settings)
    pipelines = {(stage, backend): Pipeline.from_parts(configure(base, **STAGES[stage][0]),
                                                       llms[backend], retriever)
                 for stage in stages for backend in BACKENDS}
    with records_path.open("a") as sink:
        for number, case in enumerate(cases):
            order = BACKENDS if number % 2 == 0 else BACKENDS[::-1]
            for stage in stages:
                uses_choices = STAGES[stage][1]
                if uses_choices and case.choices is None:
                    continue
                question = Question(case.question, id=case.id,
                                    choices=case.choices if uses_choices else None)
                for backend in order:
                    if (case.id, stage, backend) in done:
                        continue
                    if before and backend in before:
                        before[backend]()
                    # no options in the record: they copy the data set's answers
                    record = {"item": case.id, "stage": stage, "backend": backend,
                              **run_stage(pipelines[stage, backend], question)}
                    sink.write(json.dumps(record) + "\n")
                    sink.flush()
                    shown = record.get("answer", f"refused: {record.get('refused')}")
                    progress(f"item {number + 1}/{len(cases)} {stage:18s} {backend:8s} "
                             f"{record['seconds']:7.1f} s  {shown[:60]!r}")


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per stage, over the items both backends answered."""
    by_key = {(r["item"], r["stage"], r["backend"]): r for r in records}
    rows = []
    for stage in STAGES:
        pairs = [(by_key[item, stage, "embedded"], by_key[item, stage, "openai"])
                 for (item, s, backend) in by_key
                 if s == stage and backend == "embedded" and (item, stage, "openai") in by_key]
        if not pairs:
            continue
        refused = [sum("refused" in p[i] for p in pairs) for i in range(2)]
        pairs = [(a, b) for a, b in pairs if "refused" not in a and "refused" not in b]
        if not pairs:
            rows.append({"stage": stage, "items": 0, "refused": refused})
            continue
        agree = sum(normalize_answer(a["answer"]) == normalize_answer(b["answer"])
                    and a["choice_index"] == b["choice_index"] for a, b in pairs)
        gaps = [abs(x - y) for a, b in pairs if a["probabilities"] and b["probabilities"]
                for x, y in zip(a["probabilities"], b["probabilities"])]
        seconds = [sum(p[i]["seconds"] for p in pairs) for i in range(2)]
        rows.append({
            "stage": stage, "items": len(pairs), "answers_agree": agree,
            "agreement": round(agree / len(pairs), 4),
            "max_probability_gap": round(max(gaps), 4) if gaps else None,
            "calls_per_item": [round(sum(p[i]["llm_calls"] for p in pairs) / len(pairs), 2)
                               for i in range(2)],
            "seconds_per_item": [round(s / len(pairs), 2) for s in seconds],
            "seconds_ratio": round(seconds[1] / seconds[0], 3) if seconds[0] else None,
            "unreadable": [sum(p[i]["parse_status"] != "ok" for p in pairs) for i in range(2)],
            "refused": refused,
        })
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    lines = [("| stage | n | answers agree | largest option-probability gap | calls per item, "
              "embedded / HTTP | s per item, embedded / HTTP | time ratio |"),
             "|---|---:|---:|---:|---|---|---:|"]
    for r in rows:
        refused = f" (refused: {r['refused'][0]} / {r['refused'][1]})" if any(r["refused"]) else ""
        if not r["items"]:
            lines.append(f"| {r['stage']}{refused} | 0 | | | | | |")
            continue
        gap = "—" if r["max_probability_gap"] is None else f"{r['max_probability_gap']:.4f}"
        lines.append(
            f"| {r['stage']}{refused} | {r['items']} | {r['answers_agree']} / {r['items']} | {gap} | "
            f"{r['calls_per_item'][0]} / {r['calls_per_item'][1]} | "
            f"{r['seconds_per_item'][0]} / {r['seconds_per_item'][1]} | {r['seconds_ratio']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model preset or .gguf path")
    parser.add_argument("--setting", default="kre_musique",
                        choices=("kre_musique", "kre_squad", "ramdocs", "poisonedrag"))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--first", type=int, default=0,
                        help="skip the first N of the --limit items: lanes over disjoint ranges "
                             "run side by side into separate --out folders, whose records.jsonl "
                             "files are then concatenated")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=list(STAGES))
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--server", choices=SERVERS, default="llama-cpp-python",
                        help="the OpenAI-compatible server the benchmark starts")
    parser.add_argument("--llama-server", default=os.environ.get("FAITHRAG_LLAMA_SERVER"),
                        help="llama-server binary for --server llama-server (default: "
                             "$FAITHRAG_LLAMA_SERVER; scripts/build_llama_server.sh builds it)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="a configuration value for every stage on both backends, e.g. "
                             "csrag.enhance_context=false (repeatable)")
    parser.add_argument("--summary-only", action="store_true",
                        help="summarize the records in --out without running anything")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on kill too
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        gguf = resolve_model(args.model)
        setting = build_setting(args.setting, args.data_dir)
        kb_dir = build_trusted_index(setting, args.out / "kb", configure(None, use_cache=False))
        embedded = load_llm(configure(None, model=str(gguf), llm__n_ctx=args.n_ctx,
                                      llm__n_threads=args.threads).llm)
        with served_model(args.server, gguf, args.n_ctx, args.threads, args.out / "server.log",
                          args.llama_server) as url:
            served = load_llm(configure(None, backend="openai", base_url=url, model=SERVED_NAME,
                                        llm__tokenizer=str(gguf), llm__timeout=600).llm)
            cases = setting_cases(setting, args.limit)[args.first:]
            run({"embedded": embedded, "openai": served}, cases,
                setting_retriever(setting), str(kb_dir), args.stages, args.k, args.out,
                lambda line: print(line, file=sys.stderr, flush=True),
                before={"openai": lambda: start_afresh(served)},
                **{key.replace(".", "__"): value
               for key, value in parse_set_options(args.settings).items()})
    rows = summarize(read_records(args.out / "records.jsonl"))
    (args.out / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(render(rows))


if __name__ == "__main__":
    main()

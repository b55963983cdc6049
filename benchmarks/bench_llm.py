"""Speed of the embedded llama.cpp backend, one sub-command per measure.

`presets`: prompt and generation tokens/s per model preset, and the cost of a CSRAG-sized token
bias on generation.

    python benchmarks/bench_llm.py presets tiny fast default --out llm.json

- prompt tokens/s: a ~500-token prompt with max_tokens=1 (each call starts with an empty KV
  cache), prompt_tokens / seconds of the request;
- generation tokens/s: a counting prompt that yields long output, max_tokens=128, greedy; each
  call first runs a 1-token primer on the same prompt, so the measured request finds the prompt
  cached and its time is almost all decoding (completion_tokens / seconds);
- bias ratio: generation tokens/s with a 300-id bias (150 ids at -1, 150 at +3, the shape of
  CSRAG's T_p/T_c) over tokens/s without, the two measured interleaved in the same run (the
  order alternates between repeats); also the time of one dense bias add, measured alone, and
  its share of a generation step (immune to the noise that other processes add to the ratio).
Medians over --repeats runs (the best run and the median of per-pair ratios are kept too:
interference from other processes only ever slows a run down). The 1/5/15-minute load average
before and after each preset is recorded: on a machine whose cores are busy, llama.cpp's OpenMP
threads wait for each other and more threads can be much slower (use --n-threads 1 there).
Results go to --out as JSON; a markdown table is printed.

`parallel`: does decoding several sequences in one llama.cpp batch pay on this CPU? A short
prompt is evaluated once and copied to K sequence ids, then --steps decoding steps run with K = 1
and with K = --max-seqs, interleaved, --repeats times: tokens/s summed over the K sequences, and
the time of one K-token step over one 1-token step (K: no gain at all, 1: a free batch).

    python benchmarks/bench_llm.py parallel --model default --threads 1 --max-seqs 6

`lookup`: prompt-lookup decoding (`llm.lookup_tokens`) against plain greedy decoding, on real
items. Two copies of the same model, one decoding plainly and one with prompt-lookup drafts, run
the same method on the same items in one process (the order alternates per item, so drift on a
shared machine falls on both). Caches are off, so every call is made. Per item and stage:
seconds on each side, whether each completion came out identical, and the draft statistics. One
JSON line per item is appended to OUT/items.jsonl as it finishes (re-running resumes), and the
completions' texts, which quote the data, to OUT/texts.jsonl; OUT/summary.json holds the medians
of the per-item time ratios, and the identical-output and draft acceptance rates.

    python benchmarks/bench_llm.py lookup --dataset faitheval_counterfactual --method csrag \
      --limit 10 --threads 1 --out runs/lookup/faitheval-csrag

`pass-costs`: what drafting trades on, the time of one forward pass over k tokens (after a
500-token context) against one over a single token, medians over repeats, in OUT/pass_costs.json.

    python benchmarks/bench_llm.py pass-costs --threads 1 --out runs/lookup/pass-costs

`parallel` and `pass-costs` time forward passes the backend does not expose one by one, so they
open the model through llama-cpp-python's C bindings.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithrag import registry
from faithrag.cli.common import parse_set_options
from faithrag.config import Config
from faithrag.errors import ModelNotFoundError
from faithrag.eval.datasets import load_dataset
from faithrag.eval.runner import prepare
from faithrag.llm import load_llm
from faithrag.llm.base import LLM, Completion, GenerationRequest, TokenBias, user_prompt
from faithrag.llm.llamacpp import DenseBias, LlamaCppLLM
from faithrag.llm.llamacpp_runtime import cpu_reports_amx
from faithrag.llm.models import PRESETS, resolve_model
from faithrag.types import Trace

# ---------------------------------------------------------------- presets

PASSAGE = (
    "The Rhine is a river that begins in the Swiss canton of Graubunden in the southeastern "
    "Swiss Alps. It forms part of the Swiss-Liechtenstein, Swiss-Austrian and Swiss-German "
    "borders, then flows through Germany and the Netherlands before it empties into the North "
    "Sea. It is one of the major rivers of Europe and carries a large share of its inland "
    "freight. "
)
COUNT_PROMPT = "Count from 1 to 300, one number per line. Do not stop early."


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


def long_prompt(llm: LlamaCppLLM, target: int, run: int) -> tuple:
    text = f"Run {run}. Read the passage and summarise it in one sentence.\n\n"
    while llm.count_chat_tokens(user_prompt(text + PASSAGE)) < target:
        text += PASSAGE
    return user_prompt(text)


def csrag_bias(vocab_size: int, size: int, seed: int = 0) -> TokenBias:
    ids = np.random.default_rng(seed).choice(vocab_size, size=size, replace=False)
    half = size // 2
    return TokenBias.from_sets([(-1.0, ids[:half].tolist()), (3.0, ids[half:].tolist())])


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def bench_preset(preset: str, args: argparse.Namespace) -> dict:
    load_before = load_average()
    t0 = time.perf_counter()
    llm = LlamaCppLLM(preset, n_ctx=args.n_ctx, n_threads=args.n_threads)
    load_seconds = time.perf_counter() - t0

    prompt_runs = []
    for run in range(args.repeats + 1):  # the first run warms up; every call starts uncached
        [c] = llm.generate([GenerationRequest(long_prompt(llm, args.prompt_tokens, run),
                                              max_tokens=1)])
        if run:
            prompt_runs.append({"tokens": c.prompt_tokens, "seconds": c.seconds,
                                "tokens_per_s": c.prompt_tokens / c.seconds})

    bias = csrag_bias(llm.vocab_size, args.bias_size)
    primer = GenerationRequest(user_prompt(COUNT_PROMPT), max_tokens=1)
    plain = GenerationRequest(user_prompt(COUNT_PROMPT), max_tokens=args.gen_tokens)
    biased = GenerationRequest(user_prompt(COUNT_PROMPT), max_tokens=args.gen_tokens, bias=bias)
    llm.generate([primer, plain])  # warm-up
    runs: dict[str, list[dict]] = {"plain": [], "biased": []}
    for rep in range(args.repeats):
        order = [("plain", plain), ("biased", biased)]
        for label, request in order if rep % 2 == 0 else order[::-1]:
            # the primer evaluates the prompt; the measured request re-uses it within the call
            _, c = llm.generate([primer, request])
            runs[label].append({"tokens": c.completion_tokens, "seconds": c.seconds,
                                "tokens_per_s": c.completion_tokens / c.seconds,
                                "finish_reason": c.finish_reason})

    scores = np.zeros(llm.vocab_size, dtype=np.float32)
    processor = DenseBias(bias, llm.vocab_size)
    n_add = 2000
    t = time.perf_counter()
    for _ in range(n_add):
        processor(None, scores)
    add_us = (time.perf_counter() - t) / n_add * 1e6

    med = {k: statistics.median(r["tokens_per_s"] for r in v) for k, v in runs.items()}
    best = {k: max(r["tokens_per_s"] for r in v) for k, v in runs.items()}
    pair_ratios = [b["tokens_per_s"] / p["tokens_per_s"]
                   for p, b in zip(runs["plain"], runs["biased"])]
    result = {
        "preset": preset,
        "model": PRESETS[preset].description,
        "file": resolve_model(preset).name,
        "n_threads": llm.n_threads,
        "n_ctx": llm.context_window,
        "vocab_size": llm.vocab_size,
        "extra_bufts_disabled": llm.extra_bufts_disabled,
        "load_seconds": load_seconds,
        "prompt_tokens_per_s": statistics.median(r["tokens_per_s"] for r in prompt_runs),
        "generation_tokens_per_s": med["plain"],
        "generation_tokens_per_s_biased": med["biased"],
        "bias_ratio": med["biased"] / med["plain"],
        "bias_ratio_of_best_runs": best["biased"] / best["plain"],
        "bias_ratio_median_of_pairs": statistics.median(pair_ratios),
        "generation_tokens_per_s_best": best["plain"],
        "generation_tokens_per_s_biased_best": best["biased"],
        "bias_entries": len(bias),
        "bias_add_microseconds": add_us,
        "bias_add_share_of_token_time": add_us * 1e-6 * med["plain"],
        "load_average_before_after": [load_before, load_average()],
        "runs": {"prompt": prompt_runs, **runs},
    }
    llm.close()
    return result


def markdown(results: list[dict]) -> str:
    lines = [("| preset | model | threads | prompt tok/s | gen tok/s | gen tok/s, 300-id bias "
              "| ratio (median; of best runs) | bias add (µs/step; share of a step) | load (s) |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| {r['preset']} | {r['model']} | {r['n_threads']} | {r['prompt_tokens_per_s']:.0f} "
            f"| {r['generation_tokens_per_s']:.1f} | {r['generation_tokens_per_s_biased']:.1f} "
            f"| {r['bias_ratio']:.3f} (best {r['bias_ratio_of_best_runs']:.3f}) | "
            f"{r['bias_add_microseconds']:.0f}; {r['bias_add_share_of_token_time']:.2%} "
            f"| {r['load_seconds']:.1f} |")
    return "\n".join(lines)


def presets(args: argparse.Namespace) -> int:
    chosen = args.presets or [p for p in PRESETS if _assembled(p)]
    results = [bench_preset(p, args) for p in chosen]
    import llama_cpp

    report = {
        "command": " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "presets", "measure", "handler")},
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(results))
    print(f"\n{report['command']}  ({report['date']}, {report['cpu']}); JSON: {args.out}")
    return 0


def _assembled(preset: str) -> bool:
    try:
        resolve_model(preset)
        return True
    except ModelNotFoundError:
        return False


# ---------------------------------------------------------------- raw llama.cpp passes

class RawContext:
    """A model and context opened through llama-cpp-python's C bindings, as the backend opens
    them (AMX kernels off where this build has them and the CPU reports AMX: they crash on some
    CPUs), for timing single forward passes."""

    def __init__(self, model: str, n_ctx: int, n_threads: int, n_seq_max: int = 1):
        import llama_cpp as lib

        self.lib = lib
        lib.llama_backend_init()
        model_params = lib.llama_model_default_params()
        if ("use_extra_bufts" in dict(type(model_params)._fields_)
                and b"AMX_INT8 = 1" in lib.llama_print_system_info() and cpu_reports_amx()):
            model_params.use_extra_bufts = False
        self.model = lib.llama_model_load_from_file(str(resolve_model(model)).encode(),
                                                    model_params)
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_seq_max = n_ctx, n_seq_max
        params.n_batch = params.n_ubatch = 512
        params.n_threads = params.n_threads_batch = n_threads
        params.kv_unified = True
        self.ctx = lib.llama_init_from_model(self.model, params)
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.batch = lib.llama_batch_init(512, 0, n_seq_max)
        self.memory = lib.llama_get_memory(self.ctx)

    def tokenize(self, text: bytes) -> list[int]:
        buf = (self.lib.llama_token * (len(text) + 8))()
        n = self.lib.llama_tokenize(self.vocab, text, len(text), buf, len(buf), True, False)
        return list(buf[:n])

    def decode(self, entries: Sequence[tuple[int, int, int]], logits: bool = True) -> None:
        """One llama_decode over (token, position, sequence id) entries; logits for every
        entry, or for the last only."""
        batch = self.batch
        batch.n_tokens = len(entries)
        for i, (token, pos, seq) in enumerate(entries):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
            batch.seq_id[i][0], batch.logits[i] = seq, logits or i == len(entries) - 1
        if self.lib.llama_decode(self.ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    def truncate(self, seq: int, length: int) -> None:
        self.lib.llama_memory_seq_rm(self.memory, seq, length, -1)

    def copy_sequence(self, source: int, target: int) -> None:
        self.lib.llama_memory_seq_cp(self.memory, source, target, -1, -1)

    def close(self) -> None:
        self.lib.llama_batch_free(self.batch)
        self.lib.llama_free(self.ctx)
        self.lib.llama_model_free(self.model)


ROMAN = b"The history of the Roman empire is long, and it begins with"


def parallel(args: argparse.Namespace) -> int:
    raw = RawContext(args.model, 2048, args.threads, n_seq_max=args.max_seqs)
    prompt = raw.tokenize(ROMAN)
    raw.decode([(t, i, 0) for i, t in enumerate(prompt)])
    for seq in range(1, args.max_seqs):
        raw.copy_sequence(0, seq)
    token = prompt[-1]

    def run(k: int) -> float:
        for seq in range(args.max_seqs):
            raw.truncate(seq, len(prompt))
        start = time.perf_counter()
        for step in range(args.steps):
            raw.decode([(token, len(prompt) + step, seq) for seq in range(k)])
        return time.perf_counter() - start

    k = args.max_seqs
    singles, batched = [], []
    for repeat in range(args.repeats):
        for which in ([1, k] if repeat % 2 == 0 else [k, 1]):
            (singles if which == 1 else batched).append(run(which))
    raw.close()
    one, many = statistics.median(singles), statistics.median(batched)
    result = {
        "date": dt.date.today().isoformat(), "model": args.model, "threads": args.threads,
        "steps": args.steps, "repeats": args.repeats, "sequences": k,
        "load_average": os.getloadavg(),
        "tok_per_s_one_sequence": round(args.steps / one, 2),
        f"tok_per_s_{k}_sequences": round(k * args.steps / many, 2),
        "step_time_ratio": round(many / one, 3),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


def pass_costs(model: str, threads: int, repeats: int = 7,
               sizes: Sequence[int] = (1, 2, 3, 4, 6, 8, 11, 16)) -> dict[str, Any]:
    """Median seconds of one pass over k tokens after a fixed 500-token context, and its ratio
    to k = 1; the sizes are interleaved within each repeat."""
    raw = RawContext(model, 2048, threads)
    context = raw.tokenize((ROMAN + b" ") * 40)[:500]
    raw.decode([(t, i, 0) for i, t in enumerate(context)], logits=False)
    times: dict[int, list[float]] = defaultdict(list)
    for _ in range(repeats):
        for k in sizes:
            raw.truncate(0, len(context))
            start = time.perf_counter()
            raw.decode([(t, len(context) + i, 0) for i, t in enumerate(context[:k])])
            times[k].append(time.perf_counter() - start)
    raw.close()
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {"date": dt.date.today().isoformat(), "model": model, "threads": threads,
            "repeats": repeats, "seconds": medians,
            "ratio_to_one": {k: medians[k] / medians[1] for k in sizes}}


def pass_costs_command(args: argparse.Namespace) -> int:
    costs = pass_costs(args.model, args.threads)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "pass_costs.json").write_text(json.dumps(costs, indent=2) + "\n")
    print(json.dumps(costs, indent=2))
    return 0


# ---------------------------------------------------------------- prompt-lookup drafts

class RecordingLLM:
    """Forwards to `llm` and keeps the text of every completion it returns."""

    def __init__(self, llm: LLM):
        self._llm = llm
        self.texts: list[str] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        completions = self._llm.generate(requests)
        self.texts.extend(c.text for c in completions)
        return completions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)


def run_side(method, recorder: RecordingLLM, prepared) -> dict[str, Any]:
    recorder.texts.clear()
    trace = Trace()
    answer = method.generate(prepared.question, prepared.passages, trace)
    stages: dict[str, float] = defaultdict(float)
    for step in trace.steps:
        stages[step.stage] += step.seconds
    return {"seconds": sum(stages.values()), "stages": dict(stages),
            "completion_tokens": trace.totals().get("completion_tokens", 0),
            "answer": answer.text, "texts": list(recorder.texts)}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["lookup"]["seconds"] / r["plain"]["seconds"] for r in rows]
    stage_ratios: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        for stage, plain in r["plain"]["stages"].items():
            if plain > 0:
                stage_ratios[stage].append(r["lookup"]["stages"].get(stage, 0.0) / plain)
    drafted = sum(r["draft"]["drafted"] for r in rows)
    accepted = sum(r["draft"]["accepted"] for r in rows)
    same = [flag for r in rows for flag in r["identical_completions"]]
    return {
        "n": len(rows),
        "median_time_ratio": statistics.median(ratios) if ratios else None,
        "median_stage_ratio": {s: statistics.median(v) for s, v in stage_ratios.items()},
        "median_seconds": {side: statistics.median(r[side]["seconds"] for r in rows)
                           for side in ("plain", "lookup")} if rows else {},
        "identical_answers": sum(r["plain"]["answer"] == r["lookup"]["answer"] for r in rows),
        "identical_completions": f"{sum(same)}/{len(same)}",
        "drafted": drafted,
        "accepted": accepted,
        "acceptance": accepted / drafted if drafted else None,
        "tokens_per_draft_pass": (accepted + sum(r["draft"]["passes"] for r in rows))
        / max(1, sum(r["draft"]["passes"] for r in rows)),
    }


def lookup(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "items.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    done = {r["id"] for r in rows}
    dataset = load_dataset(args.dataset, args.data_dir, "dev")
    items = [(index, item) for index, item in
             enumerate(dataset.items[args.offset:args.offset + args.limit]) if item.id not in done]
    if items:  # a finished run only has its summary rewritten
        overrides = {"llm.model": args.model, "llm.n_threads": args.threads, "use_cache": False,
                     **parse_set_options(args.set)}
        plain_cfg = Config.load(None, overrides)
        lookup_cfg = Config.load(None, {**overrides, "llm.lookup_tokens": args.lookup_tokens,
                                        "llm.lookup_ngram": args.lookup_ngram})
        plain = RecordingLLM(load_llm(plain_cfg.llm))
        lookup = RecordingLLM(load_llm(lookup_cfg.llm))
        methods = {"plain": (registry.build("generator", args.method, plain, plain_cfg), plain),
                   "lookup": (registry.build("generator", args.method, lookup, lookup_cfg), lookup)}
    for index, item in items:
        prepared = prepare(item, args.method, 0, args.context)
        if prepared is None:
            continue
        order = ("plain", "lookup") if index % 2 == 0 else ("lookup", "plain")
        before = dict(lookup.lookup_stats)
        row: dict[str, Any] = {"id": item.id}
        for side in order:
            method, recorder = methods[side]
            row[side] = run_side(method, recorder, prepared)
        row["draft"] = {k: lookup.lookup_stats[k] - before[k] for k in before}
        texts = {side: row[side].pop("texts") for side in ("plain", "lookup")}
        row["identical_completions"] = [a == b for a, b in zip(texts["plain"], texts["lookup"])]
        with open(out / "texts.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"id": item.id, **texts}, ensure_ascii=False) + "\n")
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        rows.append(row)
        print(f"{item.id}: plain {row['plain']['seconds']:.1f} s, lookup "
              f"{row['lookup']['seconds']:.1f} s, same answer "
              f"{row['plain']['answer'] == row['lookup']['answer']}, draft {row['draft']}",
              flush=True)

    summary = {"date": dt.date.today().isoformat(), "dataset": args.dataset,
               "method": args.method, "model": args.model, "threads": args.threads,
               "lookup_tokens": args.lookup_tokens, "lookup_ngram": args.lookup_ngram,
               "set": args.set, **summarise(rows)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="measure", required=True)
    p = sub.add_parser("presets", help="prompt and generation tokens/s, and the bias's cost")
    p.add_argument("presets", nargs="*", help="presets to measure (default: all assembled)")
    p.add_argument("--out", type=Path, required=True, help="JSON file to write")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--prompt-tokens", type=int, default=500)
    p.add_argument("--gen-tokens", type=int, default=128)
    p.add_argument("--bias-size", type=int, default=300)
    p.add_argument("--n-ctx", type=int, default=2048)
    p.add_argument("--n-threads", type=int, default=None, help="default: usable cores")
    p.set_defaults(handler=presets)
    p = sub.add_parser("parallel", help="K sequences in one batch against one")
    p.add_argument("--model", default="default")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-seqs", type=int, default=4)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", help="JSON file to write")
    p.set_defaults(handler=parallel)
    p = sub.add_parser("pass-costs", help="one forward pass over k tokens against one token")
    p.add_argument("--model", default="default")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True, help="folder for pass_costs.json")
    p.set_defaults(handler=pass_costs_command)
    p = sub.add_parser("lookup", help="prompt-lookup drafts against plain decoding")
    p.add_argument("--dataset", default="faitheval_counterfactual")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--method", default="csrag")
    p.add_argument("--context", default="given", choices=["given", "golden"])
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--model", default="default")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lookup-tokens", type=int, default=10)
    p.add_argument("--lookup-ngram", type=int, default=3)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", required=True)
    p.set_defaults(handler=lookup)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())

"""Speed of the embedded llama.cpp backend: prompt and generation tokens/s per model preset, and
the cost of a CSRAG-sized token bias on generation.

    python benchmarks/bench_llm.py tiny fast --out benchmarks/results/llm.json

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
interference from other processes only ever slows a run down). The 1/5/15-minute load average before and after each preset is
recorded: on a machine whose cores are busy, llama.cpp's OpenMP threads wait for each other and
more threads can be much slower (use --n-threads 1 there). Results go to --out as JSON; a markdown table is printed.
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
from pathlib import Path

import numpy as np

from faithrag.errors import ModelNotFoundError
from faithrag.llm.base import GenerationRequest, TokenBias, user_prompt
from faithrag.llm.llamacpp import DenseBias, LlamaCppLLM
from faithrag.llm.models import PRESETS, resolve_model

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("presets", nargs="*", help="presets to measure (default: all assembled)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=500)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--bias-size", type=int, default=300)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--n-threads", type=int, default=None, help="default: usable cores")
    args = parser.parse_args(argv)

    presets = args.presets or [p for p in PRESETS if _assembled(p)]
    results = [bench_preset(p, args) for p in presets]
    import llama_cpp

    report = {
        "command": " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "presets")},
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


if __name__ == "__main__":
    sys.exit(main())

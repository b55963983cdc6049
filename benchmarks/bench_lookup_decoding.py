"""Prompt-lookup decoding (`llm.lookup_tokens`) against plain greedy decoding, on real items.

Two copies of the same llama.cpp model, one decoding plainly and one with prompt-lookup drafts,
run the same method on the same items in one process, one after the other (the order alternates
per item, so drift on a shared machine falls on both). Caches are off, so every call is made.
Per item and stage: seconds on each side, whether each completion came out identical, and the
draft statistics. One JSON line per item is appended to OUT/items.jsonl as it finishes (re-running
resumes), and the completions' texts, which quote the data, to OUT/texts.jsonl; OUT/summary.json
holds the medians of the per-item time ratios, and the identical-output and draft acceptance
rates.

    python benchmarks/bench_lookup_decoding.py --dataset faitheval_counterfactual --method csrag \
      --limit 10 --threads 1 --out runs/lookup/faitheval-csrag

`--pass-costs` measures instead what drafting trades on: the time of one forward pass over k
tokens (after a 500-token context) against one over a single token, medians over repeats.

    python benchmarks/bench_lookup_decoding.py --pass-costs --threads 1 --out runs/lookup/costs
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from faithrag import registry
from faithrag.cli.common import parse_set_options
from faithrag.config import Config
from faithrag.eval.datasets import load_dataset
from faithrag.eval.runner import prepare
from faithrag.llm import load_llm
from faithrag.llm.base import LLM, Completion, GenerationRequest
from faithrag.types import Trace


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


def pass_costs(model: str, threads: int, repeats: int = 7,
               sizes: Sequence[int] = (1, 2, 3, 4, 6, 8, 11, 16)) -> dict[str, Any]:
    """Median seconds of one pass over k tokens after a fixed context, and its ratio to k = 1;
    the sizes are interleaved within each repeat."""
    from faithrag.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(model, n_ctx=2048, n_threads=threads)
    context = llm.tokenize("The history of the Roman empire is long, and it begins with " * 40)
    context = context[:500]
    llm._extend(context)
    times: dict[int, list[float]] = defaultdict(list)
    for _ in range(repeats):
        for k in sizes:
            llm._truncate(len(context))
            start = time.perf_counter()
            llm._extend(context[:k], all_logits=k > 1)
            times[k].append(time.perf_counter() - start)
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {"date": dt.date.today().isoformat(), "model": model, "threads": threads,
            "repeats": repeats, "seconds": medians,
            "ratio_to_one": {k: medians[k] / medians[1] for k in sizes}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="faitheval_counterfactual")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--method", default="csrag")
    parser.add_argument("--context", default="given", choices=["given", "golden"])
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lookup-tokens", type=int, default=10)
    parser.add_argument("--lookup-ngram", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True)
    parser.add_argument("--pass-costs", action="store_true",
                        help="measure the cost of one pass over k tokens instead")
    args = parser.parse_args()
    if args.pass_costs:
        costs = pass_costs(args.model, args.threads)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "pass_costs.json").write_text(json.dumps(costs, indent=2) + "\n")
        print(json.dumps(costs, indent=2))
        return

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


if __name__ == "__main__":
    main()

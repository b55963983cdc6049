"""What sharing a prompt prefix saves on the embedded backend, one sub-command per case.

Each case times the same requests both ways, in alternating order, on one model instance, and
counts how often the results come out the same (a cached prefix is evaluated as its own batch,
so logits may differ slightly from the single-batch default); it shows progress on stderr,
prints and optionally writes JSON (--json).

`cfrag-prefix`: llama.cpp's prefix cache (`llm.prefix_cache`) on CF-RAG's counterfactual stage.
The stage sends six requests per question; five of them repeat the same system prompt and two
worked examples for every question (`cache_prefix`). For each of the first --items questions the
same requests are timed with the cache off and on; the snapshots made on the first question
serve the later ones, as in an eval run.

    python benchmarks/bench_prompt_sharing.py cfrag-prefix --dataset hotpotqa_distractor --items 8

`crossval-prefix`: the prefix cache on cross-validated re-ranking. Every detection round sends
the question and the numbered passages again, with an instruction that changes (the pairs
already checked); detection marks them as a recurring prefix, so with the cache the embedded
backend reads them once per item instead of once per round. For each of the first --items
ranking items the re-ranker (support verdict) re-ranks the BM25 order with the cache off and on.
Records per item the seconds, detection rounds and detection seconds both ways, and whether the
removals and the ranking came out the same.

    python benchmarks/bench_prompt_sharing.py crossval-prefix --dataset ramdocs_rank --items 6

`cfrag-batching`: CF-RAG's M drafts in one generate call against M separate calls. For each of
the first --items items (item_retrieval mode with --distractors injected), CF-RAG runs once
through the pipeline while a thin wrapper records the draft requests it sends; those exact
requests are then timed as one call and as M calls, --repeats times. llama.cpp reuses the prompt
prefix the drafts share inside one call (the OpenAI backend sends them concurrently instead).

    python benchmarks/bench_prompt_sharing.py cfrag-batching --dataset hotpotqa_distractor --items 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from faithrag import registry
from faithrag.config import Config
from faithrag.eval.datasets import load_dataset
from faithrag.eval.distractors import DistractorPool
from faithrag.eval.rank_runner import first_stage_order
from faithrag.llm import load_llm
from faithrag.methods.cfrag.counterfactuals import counterfactual_requests
from faithrag.pipeline import Pipeline
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.types import Question, Trace

# ---------------------------------------------------------------- cfrag-prefix


def cfrag_prefix(args: argparse.Namespace) -> int:

    config = Config.load(None, {**registry.PLAIN_RAG, "llm.model": args.model,
                                "llm.n_threads": args.threads})
    max_tokens = config.cfrag.counterfactual_tokens
    llm = load_llm(config.llm)
    rows = []
    for number, item in enumerate(load_dataset(args.dataset, args.data_dir).items[: args.items]):
        print(f"question {number + 1}/{args.items}: {item.id}", file=sys.stderr, flush=True)
        requests = counterfactual_requests(item.question, max_tokens)
        seconds, replies = {}, {}
        for cache_on in ((False, True) if number % 2 == 0 else (True, False)):
            llm.prefix_cache = cache_on
            start = time.perf_counter()
            replies[cache_on] = [c.text for c in llm.generate(requests)]
            seconds[cache_on] = time.perf_counter() - start
        rows.append({"id": item.id, "off_s": round(seconds[False], 2),
                     "on_s": round(seconds[True], 2),
                     "prompt_tokens": sum(llm.count_chat_tokens(r.messages) for r in requests),
                     "identical_replies": sum(a == b for a, b in zip(replies[False],
                                                                     replies[True]))})
    later = rows[1:] or rows  # the first question makes the snapshots
    off, on = statistics.median(r["off_s"] for r in later), statistics.median(r["on_s"] for r in later)
    result = {"dataset": args.dataset, "model": args.model, "threads": args.threads,
              "requests_per_question": len(requests), "questions": rows,
              "median_off_s": off, "median_on_s": on, "saving": 1 - on / off,
              "identical_replies": sum(r["identical_replies"] for r in rows),
              "replies": len(rows) * len(requests)}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


# ---------------------------------------------------------------- crossval-prefix


def rerank_once(reranker, llm, item, cache_on: bool) -> dict:
    llm.prefix_cache = cache_on
    trace = Trace()
    passages = first_stage_order(item, "bm25", trace)
    start = time.perf_counter()
    result = reranker.rerank(Question(item.query, item.id), passages, trace)
    seconds = time.perf_counter() - start
    detections = [s for s in trace.steps if s.name == "crossval.detect"]
    return {"seconds": seconds, "rounds": len(detections),
            "detect_seconds": sum(s.seconds for s in detections),
            "ranking": [p.id for p in result.passages],
            "removed": [r.passage.id for r in result.removed]}


def summarise(rows: list[dict]) -> dict:
    """Medians over the items, and over those with a second detection round (the only ones the
    cache can speed up); how many items kept their removals and ranking."""
    def median(key: str, mode: str, subset: list[dict]) -> float | None:
        return round(statistics.median(r[mode][key] for r in subset), 2) if subset else None

    repeated = [r for r in rows if r["off"]["rounds"] > 1 and r["on"]["rounds"] > 1]
    summary = {"items": len(rows), "items_with_two_rounds": len(repeated),
               "same_removed": sum(r["off"]["removed"] == r["on"]["removed"] for r in rows),
               "same_ranking": sum(r["off"]["ranking"] == r["on"]["ranking"] for r in rows)}
    for subset, label in ((rows, "all"), (repeated, "two_rounds")):
        for key in ("seconds", "detect_seconds"):
            off, on = median(key, "off", subset), median(key, "on", subset)
            summary[f"{label}_{key}"] = {"off": off, "on": on,
                                         "ratio": round(on / off, 3) if off else None}
    return summary


def crossval_prefix(args: argparse.Namespace) -> int:

    config = Config.load(None, {**registry.PLAIN_RAG, "llm.model": args.model,
                                "llm.n_threads": args.threads,
                                "rerank.verdict": "support"})
    llm = load_llm(config.llm)
    reranker = registry.build("reranker", "crossval", llm, config)
    rows = []
    for number, item in enumerate(load_dataset(args.dataset, args.data_dir).items[: args.items]):
        print(f"item {number + 1}/{args.items}: {item.id}", file=sys.stderr, flush=True)
        row = {"id": item.id}
        for cache_on in ((False, True) if number % 2 == 0 else (True, False)):
            row["on" if cache_on else "off"] = rerank_once(reranker, llm, item, cache_on)
        rows.append(row)
        print(f"  off {row['off']['seconds']:.1f} s, on {row['on']['seconds']:.1f} s, "
              f"rounds {row['off']['rounds']}/{row['on']['rounds']}", file=sys.stderr, flush=True)
    result = {"dataset": args.dataset, "model": args.model, "threads": args.threads,
              "verdict": "support", **summarise(rows), "rows": rows}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


# ---------------------------------------------------------------- cfrag-batching


class DraftRecorder:
    """Delegates to the real LLM and keeps the requests of every batch of drafts."""

    def __init__(self, llm):
        self.llm = llm
        self.batches = []

    def __getattr__(self, name):
        return getattr(self.llm, name)

    def generate(self, requests):
        if requests and all(r.purpose == "draft" for r in requests):
            self.batches.append(list(requests))
        return self.llm.generate(requests)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cfrag_batching(args: argparse.Namespace) -> int:

    # the scorer does not touch the drafts: the bi-encoder keeps the preliminary run short
    config = Config.load(None, {**registry.PLAIN_RAG, "llm.model": args.model,
                                "llm.n_threads": args.threads,
                                "pipeline.method": "cfrag", "cfrag.scorer": "bi_encoder"})
    dataset = load_dataset(args.dataset, args.data_dir)
    injector = DistractorPool(dataset)
    recorder = DraftRecorder(load_llm(config.llm))
    for number, item in enumerate(dataset.items[: args.items], 1):
        print(f"pipeline run {number}/{args.items}: {item.id}", file=sys.stderr, flush=True)
        passages = item.passages() + injector.select(item, args.distractors)
        retriever = InMemoryRetriever(passages, mode=config.retrieval.mode)
        Pipeline.from_parts(config, recorder, retriever).run(Question(item.question, item.id))

    llm = recorder.llm  # timed directly: through the recorder, the timed calls would be recorded
    rows = []
    for number, batch in enumerate(recorder.batches, 1):
        print(f"timing batch {number}/{len(recorder.batches)} ({len(batch)} drafts)",
              file=sys.stderr, flush=True)
        one_call, separate = [], []
        for repeat in range(args.repeats):
            order = [0, 1] if repeat % 2 == 0 else [1, 0]
            for which in order:
                if which == 0:
                    one_call.append(timed(lambda b=batch: llm.generate(b)))
                else:
                    separate.append(timed(lambda b=batch: [llm.generate([r]) for r in b]))
        prompt_tokens = [llm.count_chat_tokens(r.messages) for r in batch]
        rows.append({"drafts": len(batch), "prompt_tokens": prompt_tokens,
                     "one_call_s": statistics.median(one_call),
                     "separate_calls_s": statistics.median(separate)})
    total_one = sum(r["one_call_s"] for r in rows)
    total_sep = sum(r["separate_calls_s"] for r in rows)
    result = {"dataset": args.dataset, "distractors": args.distractors, "model": args.model,
              "threads": args.threads, "repeats": args.repeats, "batches": rows,
              "one_call_s": total_one, "separate_calls_s": total_sep,
              "saving": 1 - total_one / total_sep if total_sep else None}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir")
    common.add_argument("--model", default="default")
    common.add_argument("--threads", type=int, default=1)
    common.add_argument("--json")
    sub = parser.add_subparsers(dest="case", required=True)
    p = sub.add_parser("cfrag-prefix", parents=[common],
                       help="llm.prefix_cache on CF-RAG's counterfactual stage")
    p.add_argument("--dataset", default="hotpotqa_distractor")
    p.add_argument("--items", type=int, default=8)
    p.set_defaults(handler=cfrag_prefix)
    p = sub.add_parser("crossval-prefix", parents=[common],
                       help="llm.prefix_cache on cross-validated re-ranking")
    p.add_argument("--dataset", default="ramdocs_rank")
    p.add_argument("--items", type=int, default=6)
    p.set_defaults(handler=crossval_prefix)
    p = sub.add_parser("cfrag-batching", parents=[common],
                       help="CF-RAG's drafts in one call against one call each")
    p.add_argument("--dataset", default="hotpotqa_distractor")
    p.add_argument("--items", type=int, default=2)
    p.add_argument("--distractors", type=int, default=16)
    p.add_argument("--repeats", type=int, default=1)
    p.set_defaults(handler=cfrag_batching)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())

"""What sending CF-RAG's M drafts in ONE generate call saves, against M separate calls.

For each of the first --items items (item_retrieval mode with --distractors injected), CF-RAG
runs once through the pipeline while a thin wrapper records the draft requests it sends; those
exact requests are then timed as one call and as M calls, in alternating order, --repeats
times. llama.cpp reuses the prompt prefix the drafts share inside one call (the OpenAI backend
would send them concurrently instead). Shows progress on stderr, prints and optionally
writes JSON.

    python benchmarks/cfrag_batching.py --dataset hotpotqa_distractor --items 2 --threads 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from faithrag.config import Config
from faithrag.eval.datasets import load_dataset
from faithrag.eval.distractors import DistractorPool
from faithrag.llm import load_llm
from faithrag.pipeline import Pipeline
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.types import Question


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="hotpotqa_distractor")
    parser.add_argument("--data-dir")
    parser.add_argument("--items", type=int, default=2)
    parser.add_argument("--distractors", type=int, default=16)
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()

    # the scorer does not touch the drafts: the bi-encoder keeps the preliminary run short
    config = Config.load(None, {"llm.model": args.model, "llm.n_threads": args.threads,
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


if __name__ == "__main__":
    main()

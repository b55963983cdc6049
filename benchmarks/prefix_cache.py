"""What llama.cpp's prefix cache (`llm.prefix_cache`) saves on CF-RAG's counterfactual stage.

The stage sends six requests per question; five of them repeat the same system prompt and two
worked examples for every question (`cache_prefix`). For each of the first --items questions
the same requests are timed with the cache off and on, in alternating order, on one model
instance; the snapshots made on the first question serve the later ones, as in an eval run.
Also counts how many of the replies are identical with and without the cache (the prefix is
evaluated as its own batch, so logits may differ slightly from the single-batch default).
Shows progress on stderr, prints and optionally writes JSON.

    python benchmarks/prefix_cache.py --dataset hotpotqa_distractor --items 8 --threads 1
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
from faithrag.llm import load_llm
from faithrag.methods.cfrag.counterfactuals import counterfactual_requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="hotpotqa_distractor")
    parser.add_argument("--data-dir")
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()

    config = Config.load(None, {"llm.model": args.model, "llm.n_threads": args.threads})
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


if __name__ == "__main__":
    main()

"""Generation speed with and without a grammar, on the same prompts, in one run.

    python benchmarks/bench_constrained.py --model default --threads 2 --limit 10 \
      --out results/constrained/speed.jsonl

Each item of --dataset (default `faitheval_counterfactual`, multiple choice) is rendered with
cot_json's prompt (the CSRAG paper's reason-then-JSON answer) and generated twice, greedily, with
`max_tokens` 256: once with the schema the stage sends (`choice_answer_schema`: the Reason bounded,
the Answer one of the options) and once without. The two are interleaved, the order alternating
per item, so drift from other processes on a shared machine falls on both sides.

Generation tokens/s is completion_tokens / seconds of a request that finds its prompt cached:
both measured requests follow a 1-token primer on the same prompt in the same generate() call (the
backend keeps the common prefix within a call), so their time is almost all decoding. Both sides
decode their own text (the constrained reply is not the unconstrained one), so the ratio compares
decoding speeds, not identical token streams. The constrained side also records the seconds spent
in grammar calls (the backend's `grammar_stats`) and their share of its time: unlike the ratio,
that share hardly moves when other processes slow the whole run down.

One JSON line per item and side goes to --out (item id, side, tokens, seconds, tokens/s, finish
reason, whether the reply parses as the schema asks, grammar seconds); the first line holds the
run's settings, the last the summary. The ratio printed is the median of per-item ratios
(constrained tokens/s over unconstrained), next to the ratio of summed tokens over summed seconds
and the median grammar share; the parse rate of each side is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

from faithrag.eval.datasets import load_dataset
from faithrag.llm.base import GenerationRequest
from faithrag.llm.llamacpp import LlamaCppLLM
from faithrag.methods.cot_answer import render_prompt
from faithrag.methods.json_answer import parse_json_answer
from faithrag.methods.schemas import choice_answer_schema
from faithrag.types import Question

MAX_TOKENS = 256


def parses(text: str, schema: dict) -> bool:
    """The reply is a JSON object with a Reason within its bound and an Answer among the options."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return (isinstance(value, dict) and set(value) == {"Reason", "Answer"}
            and isinstance(value["Reason"], str)
            and len(value["Reason"]) <= schema["properties"]["Reason"]["maxLength"]
            and value["Answer"] in schema["properties"]["Answer"]["enum"])


def prompts(dataset: str, data_root: str | None, limit: int) -> list[tuple[str, tuple, list]]:
    items = [i for i in load_dataset(dataset, data_root).items if i.choices][:limit]
    out = []
    for item in items:
        passages = item.passages()
        question = Question(item.question, choices=list(item.choices))
        messages = render_prompt(question, [p.title for p in passages])([p.text for p in passages])
        out.append((item.id, messages, list(item.choices)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dataset", default="faitheval_counterfactual")
    parser.add_argument("--data-root", default=None, help="the data folder (default: "
                        "$FAITHRAG_DATA_DIR, else ../shared/data)")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("results/constrained/speed.jsonl"))
    args = parser.parse_args(argv)

    llm = LlamaCppLLM(args.model, n_ctx=4096, n_threads=args.threads)
    items = prompts(args.dataset, args.data_root, args.limit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ratios, shares, totals = [], [], {"grammar": [0, 0.0], "plain": [0, 0.0]}
    parsed = {"grammar": 0, "plain": 0}
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(json.dumps({"settings": {**vars(args), "out": str(args.out),
                                           "max_tokens": MAX_TOKENS, "python": sys.version.split()[0],
                                           "platform": platform.platform(),
                                           "load_before": os.getloadavg()}}) + "\n")
        out.flush()
        for n, (item_id, messages, choices) in enumerate(items):
            schema = choice_answer_schema(choices, MAX_TOKENS)
            primer = GenerationRequest(tuple(messages), max_tokens=1)
            rate = {}
            sides = ["grammar", "plain"] if n % 2 == 0 else ["plain", "grammar"]
            before = dict(llm.grammar_stats)
            _, *completions = llm.generate([primer, *(
                GenerationRequest(tuple(messages), max_tokens=MAX_TOKENS,
                                  schema=schema if side == "grammar" else None)
                for side in sides)])
            grammar_seconds = llm.grammar_stats["seconds"] - before["seconds"]
            for side, completion in zip(sides, completions):
                ok = parses(completion.text, schema)
                answer = parse_json_answer(completion.text, choices).choice_index
                rate[side] = completion.completion_tokens / completion.seconds
                totals[side][0] += completion.completion_tokens
                totals[side][1] += completion.seconds
                parsed[side] += ok
                out.write(json.dumps({"item": item_id, "side": side,
                                      "tokens": completion.completion_tokens,
                                      "seconds": round(completion.seconds, 3),
                                      "tokens_per_s": round(rate[side], 3),
                                      "finish": completion.finish_reason, "schema_valid": ok,
                                      "answer_read": answer is not None,
                                      "grammar_seconds": round(grammar_seconds, 4)
                                      if side == "grammar" else 0.0}) + "\n")
                if side == "grammar":
                    shares.append(grammar_seconds / completion.seconds)
                out.flush()
            ratios.append(rate["grammar"] / rate["plain"])
            print(f"{item_id}: grammar {rate['grammar']:.2f} tok/s, plain {rate['plain']:.2f} "
                  f"tok/s, ratio {ratios[-1]:.3f}, grammar share {shares[-1]:.4f}", flush=True)
        out.write(json.dumps({"summary": {
            "items": len(items), "median_ratio": statistics.median(ratios),
            "pooled_ratio": (totals["grammar"][0] / totals["grammar"][1])
            / (totals["plain"][0] / totals["plain"][1]),
            "median_grammar_share": statistics.median(shares), "grammar_stats": llm.grammar_stats,
            "schema_valid": parsed, "load_after": os.getloadavg()}}) + "\n")
    pooled = (totals["grammar"][0] / totals["grammar"][1]) / (totals["plain"][0] / totals["plain"][1])
    print(f"median ratio (grammar / plain tokens/s) over {len(items)} items: "
          f"{statistics.median(ratios):.3f}; pooled: {pooled:.3f}; median grammar share of the "
          f"constrained side's time: {statistics.median(shares):.4f}; schema-valid replies: "
          f"grammar {parsed['grammar']}/{len(items)}, plain {parsed['plain']}/{len(items)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How often crossval's cross-validation step names the false side of a KNOWN conflicting pair.

Detection aside, the method stands on this verdict. For each ranking item holding a contrary
passage and a relevant non-contrary one, the pair (true, contrary) goes through crossval's own
validation prompt, the remaining passages of the item as the cross-checking evidence, in both
orders (true shown as A, then contrary shown as A), in one generate() call. Per order it records
- the generated verdict (as the method reads it), and
- P(A) vs P(B) scored right after the model's own "False passage:" line (one scoring pass on the
  cached prompt), so that the position bias can be averaged out:
  P(contrary false) = mean over the two orders of P(label the contrary passage had).
Prints the verdict accuracy per order, how often both orders agree (what `both_orders` needs to
remove anything), and the order-averaged accuracy. One JSON line per item in --out, resumable.

    python benchmarks/crossval_verdicts.py --dataset ramdocs_rank --items 30 --out runs/verdicts.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from faithrag.config import Config
from faithrag.eval.datasets import RankItem, load_dataset
from faithrag.eval.metrics import wilson_interval
from faithrag.llm import load_llm
from faithrag.llm.base import ChoiceRequest
from faithrag.methods.crossval import PAIR_LABELS, build_crossval
from faithrag.methods.rank_parsing import STATUS_OK, parse_verdict
from faithrag.types import Question, Trace

_VERDICT_LINE = re.compile(r"false passage\s*:", re.IGNORECASE)


def known_pair(item: RankItem):
    """(true, contrary, others) as Passages, or None when the item lacks one side or a third
    passage to cross-check against."""
    passages = item.as_passages()
    contrary = [p for p in passages if p.meta["is_contrary"]]
    true = sorted((p for p in passages if not p.meta["is_contrary"] and p.meta["relevance"] > 0),
                  key=lambda p: -p.meta["relevance"])
    if not contrary or not true or len(passages) < 3:
        return None
    others = [p for p in passages if p is not true[0] and p is not contrary[0]]
    return true[0], contrary[0], others


def verdict_prefix(reply: str) -> str:
    """The reply up to its last "False passage:" (added when the model did not write one)."""
    matches = list(_VERDICT_LINE.finditer(reply))
    if matches:
        return reply[: matches[-1].end()]
    return reply.rstrip() + "\nFalse passage:"


def judge(reranker, item: RankItem) -> dict | None:
    pair = known_pair(item)
    if pair is None:
        return None
    true, contrary, others = pair
    question = Question(item.query, item.id)
    trace = Trace()
    orders = [(true, contrary), (contrary, true)]
    with trace.step("rerank", "verdicts") as step:
        requests = [reranker._validation_request(question, x, y, others, step) for x, y in orders]
    replies = [c.text for c in reranker.llm.generate(requests)]
    record = {"id": item.id, "orders": []}
    for (x, _), request, reply in zip(orders, requests, replies):
        parsed = parse_verdict(reply)
        scores = reranker.llm.score_choices(ChoiceRequest(
            request.messages, PAIR_LABELS, answer_prefix=verdict_prefix(reply) + " ",
            purpose="verdict_probability"))
        p_a = scores.probabilities()[0]
        contrary_label = "B" if x is true else "A"
        record["orders"].append({
            "contrary_shown_as": contrary_label,
            "verdict": parsed.false_label if parsed.status == STATUS_OK else parsed.status,
            "p_A": p_a,
            "p_contrary_false": p_a if contrary_label == "A" else 1 - p_a,
            "reply": reply})
    record["p_contrary_false"] = statistics.mean(o["p_contrary_false"] for o in record["orders"])
    return record


def summarise(records: list[dict]) -> None:
    n = len(records)

    def rate(hits: int) -> str:
        low, high = wilson_interval(hits, n)
        return f"{hits}/{n} = {hits / n:.0%} [{low:.0%}, {high:.0%}]"

    for k, name in enumerate(("true shown as A", "contrary shown as A")):
        orders = [r["orders"][k] for r in records]
        right = sum(o["verdict"] == o["contrary_shown_as"] for o in orders)
        said_a = sum(o["verdict"] == "A" for o in orders)
        unread = sum(o["verdict"] not in PAIR_LABELS for o in orders)
        print(f"generated verdict, {name}: correct {rate(right)}; named A {said_a}, "
              f"unreadable or None {unread}; mean P(A) "
              f"{statistics.mean(o['p_A'] for o in orders):.2f}")
    both = sum(all(o["verdict"] == o["contrary_shown_as"] for o in r["orders"]) for r in records)
    agree = sum(len({o["verdict"] == o["contrary_shown_as"] for o in r["orders"]}) == 1
                and r["orders"][0]["verdict"] in PAIR_LABELS
                and r["orders"][1]["verdict"] in PAIR_LABELS for r in records)
    print(f"both orders name the contrary passage (crossval removes it): {rate(both)}")
    print(f"both orders name the same passage (right or wrong): {rate(agree)}")
    averaged = sum(r["p_contrary_false"] > 0.5 for r in records)
    print(f"order-averaged probability names the contrary passage: {rate(averaged)}; "
          f"median P(contrary false) {statistics.median(r['p_contrary_false'] for r in records):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="ramdocs_rank")
    parser.add_argument("--data-dir")
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True, help="JSON lines, one per item (resumed)")
    args = parser.parse_args()

    config = Config.load(None, {"llm.model": args.model, "llm.n_threads": args.threads})
    out = Path(args.out)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    done = {r["id"] for r in records}
    dataset = load_dataset(args.dataset, args.data_dir)
    reranker = build_crossval(load_llm(config.llm), config, None)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as sink:
        for item in dataset.items:
            if len(records) >= args.items:
                break
            if item.id in done:
                continue
            record = judge(reranker, item)
            if record is None:
                continue
            records.append(record)
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            print(f"{len(records)}/{args.items} {item.id}: P(contrary false) "
                  f"{record['p_contrary_false']:.2f}, verdicts "
                  f"{[o['verdict'] for o in record['orders']]}", flush=True)
    summarise(records[: args.items])


if __name__ == "__main__":
    main()

"""Cross-validated re-ranking (faithrag.methods.crossval) under the microscope, one sub-command
per analysis, and the runs of every re-ranker it is measured against.

`rerank`: every re-ranker on both ranking sets, dev split, answering from each top (runs
`faithrag eval`; see `rerank --help`).

    python benchmarks/crossval.py rerank --limit 200 --threads 1 --workers 2 --out runs/rerank

`verdicts`: how often crossval's cross-validation step names the false side of a KNOWN
conflicting pair (loads the model). Detection aside, the method stands on this verdict. For each
ranking item holding a contrary passage and a relevant non-contrary one, the pair (true,
contrary) is judged with the item's remaining passages as the cross-checking evidence, by:
- pairwise (the paper's): crossval's own validation prompt in both orders (true shown as A,
  then contrary shown as A), in one generate() call. Per order it records the generated verdict
  (as the method reads it) and P(A) vs P(B) scored right after the model's own "False passage:"
  line, so that the position bias can be averaged out: P(contrary false) = mean over the two
  orders of P(label the contrary passage had).
- support: each side's answer, then each other passage's yes/no support for it; the side with
  fewer votes is removed.
- support with `--time-shared-prefix`: the support verdict also run with one scoring call per
  claim (the backend's `score_choices_many` hidden), in alternating order with the default
  shared-prefix call; prints the median seconds of the claim scoring each way, the median
  per-pair ratio, and whether the two ways reach the same verdict.
- guard (`rerank.same_subject_check`, not a verdict): the log-odds that the pair speaks of the
  same subject, for the known (true, contrary) pair, which should pass, and, where the item has
  two valid passages giving different answers (an ambiguous question: RAMDocs), for that pair,
  which should be left standing. Prints both distributions, the AUC and, per threshold, how
  many of each kind pass.
- likelihood (a diagnostic for the paper's "rationality" criterion, not a verdict): the log-
  probability of each side as the model's own reply to a neutral request for a factual passage
  on the question (passages cut as crossval cuts them); it can only work if the false side is
  the less probable one. Prints how often it is, by the total and the per-token log-probability.
- truth (the same criterion asked outright, a diagnostic): for a contrary passage that is an
  edited copy of the true one (kre_conflict_rank), the first run of sentences the two state
  differently, each judged closed-book: the log-odds of "Yes" to "Is this statement true?"
  with no passage shown. Prints how often the contrary side's statement scores lower.
Prints, per verdict, how often the contrary passage would be removed (the pairwise verdict
removes only when both orders agree), how often the true one would, and the order-averaged
accuracy. One JSON line per item in --out, resumable.

    python benchmarks/crossval.py verdicts --dataset ramdocs_rank --items 20 --verdicts support \
      --out runs/crossval/ramdocs_rank-support.jsonl

`removals`: what a run's verdicts did to each kind of passage pair, from its traces (no model).
Every pair crossval judged (a `crossval.validate` step) is classed by the dataset's roles of its
two passages (ramdocs_rank: `correct`, `misinfo` = the contrary passage, `noise`) and by the
outcome: a side removed (the contrary side or another) or, where nothing was removed, the step's
status: no two different answers ("none"), tied support, the two orders' verdicts disagreeing,
the same-subject check, or an unreadable reply. For `correct`–`correct` pairs the two
documents' answers are both gold answers, two valid readings of an ambiguous question: removing
either side is wrong. Under the "support" verdict a second table splits the pairs with no two
answers by why: neither side's passage gave an answer ("NOT STATED"), one side's did not, or
both gave the same answer. The last table crosses the removed passage's role with the kept one's.
With `--guard OUT` the same-subject check is replayed on every removed pair (loads the model):
the log-odds that the two passages speak of the same subject (crossval asks it after the two
answers differ and before the support votes, so on a removed pair it decides alone whether the
removal stands). One JSON line per pair in OUT, resumable; then, per kind of removal and
threshold, how many the check would have left standing. Later detection rounds are not
replayed: a pair left standing may change what they pick.

    python benchmarks/crossval.py removals results/rerank200/ramdocs_rank-crossval-support

`ceiling`: what removing the contrary passages alone could give a re-ranking run (no model).
Each ranking is scored as recorded and again with every contrary passage taken out and the rest
left in order, which is what a perfect verdict would leave for the listwise step to re-order. On
the retriever's order ("none") this bounds how much nDCG@1 crossval can gain by removal alone.

    python benchmarks/crossval.py ceiling results/rerank200/ramdocs_rank-none
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from faithrag.answers import same_answer
from faithrag.config import Config
from faithrag.eval.datasets import RankItem, load_dataset
from faithrag.eval.ranking_metrics import ranking_metrics
from faithrag.eval.report import load_run
from faithrag.eval.stats import bootstrap_ci, wilson_interval
from faithrag.llm import load_llm
from faithrag.llm.base import ChoiceRequest, Message
from faithrag.methods.common import cut_text
from faithrag.methods.crossval import PAIR_LABELS, build_crossval
from faithrag.methods.rank_parsing import STATUS_OK, parse_verdict
from faithrag.retrieval.chunking import sentence_spans
from faithrag.retrieval.scorers.llm_judge import yes_log_odds
from faithrag.types import Question, Trace

# ---------------------------------------------------------------- verdicts on known pairs

_VERDICT_LINE = re.compile(r"false passage\s*:", re.IGNORECASE)
LIKELIHOOD_SYSTEM = "You write accurate, factual encyclopedia passages."
LIKELIHOOD_REQUEST = "Write a passage with the facts needed to answer this question: {question}"
TRUTH_SYSTEM = "You judge statements from your own knowledge."
TRUTH_INSTRUCTION = "Is this statement true? Answer Yes or No."
_WORD = re.compile(r"\w+")


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


def ambiguity_pair(item: RankItem):
    """Two relevant non-contrary passages whose labelled answers differ (two valid readings of
    an ambiguous question), or None."""
    valid = [p for p in item.as_passages() if not p.meta["is_contrary"]
             and p.meta["relevance"] > 0 and p.meta.get("doc_answer")]
    for i, first in enumerate(valid):
        for second in valid[i + 1:]:
            if not same_answer(first.meta["doc_answer"], second.meta["doc_answer"]):
                return first, second
    return None


def verdict_prefix(reply: str) -> str:
    """The reply up to its last "False passage:" (added when the model did not write one)."""
    matches = list(_VERDICT_LINE.finditer(reply))
    if matches:
        return reply[: matches[-1].end()]
    return reply.rstrip() + "\nFalse passage:"


class OneCallPerClaim:
    """The LLM without `score_choices_many`: every claim is scored in a call of its own."""

    def __init__(self, llm):
        self.llm = llm

    def __getattr__(self, name):
        if name == "score_choices_many":
            raise AttributeError(name)
        return getattr(self.llm, name)


def support(reranker, question: Question, true, contrary, others) -> dict:
    start = time.perf_counter()
    with Trace().step("rerank", "verdicts") as step:
        status, verdict = reranker.support_verdict(question, true, contrary, others, step)
    return {"status": status, "removed": verdict[0].id if verdict else None,
            **{k: step.outputs.get(k) for k in ("answers", "votes", "p_yes")},
            "seconds": round(time.perf_counter() - start, 2),
            "scoring_seconds": round(sum(c.seconds for c in step.llm_calls
                                         if c.purpose == "support_judge"), 2)}


def likelihood(reranker, question: Question, true, contrary) -> dict:
    """Total log-probability and token count of each side (true first) as the model's reply."""
    messages = (Message("system", LIKELIHOOD_SYSTEM),
                Message("user", LIKELIHOOD_REQUEST.format(question=question.text.strip())))
    scores = reranker.llm.score_choices(ChoiceRequest(
        messages, (cut_text(reranker.llm, true.text, reranker.passage_tokens),
                   cut_text(reranker.llm, contrary.text, reranker.passage_tokens)), purpose="likelihood"))
    return {"logprob": scores.logprobs, "tokens": scores.token_counts}


def differing_sentences(true_text: str, contrary_text: str) -> tuple[str, str] | None:
    """The first run of sentences the two passages state differently (the true passage's, the
    contrary one's), or None when they differ only by whole sentences added or dropped. Runs
    that differ only in punctuation, spacing or case (edits made on the way) are passed over."""
    a = [true_text[i:j] for i, j in sentence_spans(true_text)]
    b = [contrary_text[i:j] for i, j in sentence_spans(contrary_text)]
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        first, second = " ".join(a[i1:i2]), " ".join(b[j1:j2])
        if op == "replace" and _WORD.findall(first.lower()) != _WORD.findall(second.lower()):
            return first, second
    return None


def truth(reranker, true, contrary) -> dict:
    """Closed-book log-odds that each side's differing statement is true (true first)."""
    statements = differing_sentences(true.text, contrary.text)
    if statements is None:
        return {"statements": None, "log_odds": None}

    def render(texts: list[str]) -> tuple[Message, ...]:
        return (Message("system", TRUTH_SYSTEM),
                Message("user", f"Statement: {texts[0]}\n\n{TRUTH_INSTRUCTION}"))

    odds = [yes_log_odds(reranker.llm, render, [s], "truth", None, reserve=4)
            for s in statements]
    return {"statements": list(statements), "log_odds": odds}


def judge(reranker, item: RankItem, verdicts: tuple[str, ...] = ("pairwise",),
          separate=None, separate_first: bool = False) -> dict | None:
    """`separate`: the same reranker on `OneCallPerClaim`, to time the support verdict both
    ways (`separate_first` says which runs first)."""
    pair = known_pair(item)
    if pair is None:
        return None
    true, contrary, others = pair
    question = Question(item.query, item.id)
    record = {"id": item.id, "contrary": contrary.id}
    if "support" in verdicts:
        ways = [("support", reranker)] + ([("support_separate", separate)] if separate else [])
        for key, way in (ways[::-1] if separate_first else ways):
            record[key] = support(way, question, true, contrary, others)
    if "pairwise" in verdicts:
        record.update(pairwise(reranker, question, true, contrary, others))
    if "likelihood" in verdicts:
        record["likelihood"] = likelihood(reranker, question, true, contrary)
    if "truth" in verdicts:
        record["truth"] = truth(reranker, true, contrary)
    if "guard" in verdicts:
        ambiguous = ambiguity_pair(item)
        with Trace().step("rerank", "verdicts") as step:
            record["guard"] = {
                "contrary_pair": reranker.same_subject(question, true, contrary, step),
                "ambiguous_pair": (reranker.same_subject(question, *ambiguous, step)
                                   if ambiguous else None)}
    return record


def auc(positives: list[float], negatives: list[float]) -> float:
    """P(a random positive scores above a random negative), ties counting half."""
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def summarise_guard(records: list[dict]) -> None:
    guards = [r["guard"] for r in records if "guard" in r]
    if not guards:
        return
    same = [g["contrary_pair"] for g in guards]
    different = [g["ambiguous_pair"] for g in guards if g["ambiguous_pair"] is not None]
    print(f"same-subject log-odds: contrary pairs (one subject) n={len(same)}, median "
          f"{statistics.median(same):+.2f}; ambiguity pairs (two subjects) n={len(different)}"
          + (f", median {statistics.median(different):+.2f}, AUC {auc(same, different):.2f}"
             if different else ""))
    for threshold in (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0):
        passed = sum(x >= threshold for x in same)
        blocked = sum(x < threshold for x in different)
        print(f"  threshold {threshold:+.1f}: contrary pairs judged {rate(passed, len(same))}"
              + (f"; ambiguity pairs left standing {rate(blocked, len(different))}"
                 if different else ""))


def pairwise(reranker, question: Question, true, contrary, others) -> dict:
    trace = Trace()
    orders = [(true, contrary), (contrary, true)]
    with trace.step("rerank", "verdicts") as step:
        requests = [reranker.validation_request(question, x, y, others, step) for x, y in orders]
    replies = [c.text for c in reranker.llm.generate(requests)]
    record = {"orders": []}
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


def progress(record: dict) -> str:
    parts = []
    if "support" in record:
        support = record["support"]
        parts.append(f"support removes {support['removed']} ({support['status']})")
    if "orders" in record:
        parts.append(f"pairwise {[o['verdict'] for o in record['orders']]}")
    if "likelihood" in record:
        total = record["likelihood"]["logprob"]
        parts.append(f"log P true - contrary {total[0] - total[1]:+.1f}")
    if "truth" in record:
        odds = record["truth"]["log_odds"]
        parts.append("no sentence edited" if odds is None
                     else f"truth log-odds true - contrary {odds[0] - odds[1]:+.2f}")
    if "guard" in record:
        same = {k: None if v is None else round(v, 2) for k, v in record["guard"].items()}
        parts.append(f"same-subject log-odds {same}")
    return "; ".join(parts)


def rate(hits: int, n: int) -> str:
    low, high = wilson_interval(hits, n)
    return f"{hits}/{n} = {hits / n:.0%} [{low:.0%}, {high:.0%}]"


def summarise_shared_prefix(records: list[dict]) -> None:
    pairs = [(r["support"], r["support_separate"]) for r in records if "support_separate" in r]
    scored = [(a, b) for a, b in pairs if a["p_yes"] and b["p_yes"] and b["scoring_seconds"] > 0]
    if not scored:
        return
    same = sum((a["status"], a["removed"]) == (b["status"], b["removed"]) for a, b in pairs)
    shift = max(abs(x - y) for a, b in scored
                for ref in a["p_yes"] for x, y in zip(a["p_yes"][ref], b["p_yes"][ref]))
    print(f"claim scoring, n={len(scored)} pairs that reached it: median "
          f"{statistics.median(a['scoring_seconds'] for a, _ in scored):.1f} s in one call with "
          f"the shared prefix, {statistics.median(b['scoring_seconds'] for _, b in scored):.1f}"
          f" s in one call per claim; median per-pair ratio "
          f"{statistics.median(a['scoring_seconds'] / b['scoring_seconds'] for a, b in scored):.2f}"
          f" (whole verdict "
          f"{statistics.median(a['seconds'] / b['seconds'] for a, b in scored):.2f}); "
          f"same verdict {same}/{len(pairs)}; largest P(yes) difference {shift:.3f}")


def summarise_likelihood(records: list[dict]) -> None:
    sides = [r["likelihood"] for r in records if "likelihood" in r]
    if not sides:
        return
    n = len(sides)
    total = [s["logprob"][0] - s["logprob"][1] for s in sides]
    mean = [s["logprob"][0] / max(s["tokens"][0], 1) - s["logprob"][1] / max(s["tokens"][1], 1)
            for s in sides]
    print(f"likelihood: the contrary passage is the less probable side by total log-prob "
          f"{rate(sum(d > 0 for d in total), n)}, by per-token log-prob "
          f"{rate(sum(d > 0 for d in mean), n)}; median true - contrary {statistics.median(total):+.1f}"
          f" nats in all, {statistics.median(mean):+.3f} per token")


def summarise_truth(records: list[dict]) -> None:
    judged = [r["truth"]["log_odds"] for r in records if "truth" in r]
    if not judged:
        return
    odds = [o for o in judged if o is not None]
    if not odds:
        print(f"truth: no edited sentence in {len(judged)} pairs")
        return
    lower = sum(o[1] < o[0] for o in odds)
    print(f"truth: the contrary statement scores lower {rate(lower, len(odds))} "
          f"({len(judged) - len(odds)} pairs without an edited sentence); median log-odds "
          f"true {statistics.median(o[0] for o in odds):+.2f}, contrary "
          f"{statistics.median(o[1] for o in odds):+.2f}")
    for margin in (0.5, 1.0):
        decided = [o for o in odds if abs(o[0] - o[1]) >= margin]
        if decided:
            print(f"  sides at least {margin} apart: the contrary one lower "
                  f"{rate(sum(o[1] < o[0] for o in decided), len(decided))}")


def summarise(records: list[dict]) -> None:
    summarise_guard(records)
    summarise_likelihood(records)
    summarise_truth(records)
    summarise_shared_prefix(records)
    support = [r["support"] for r in records if "support" in r]
    contrary = [r["contrary"] for r in records if "support" in r]
    if support:
        n = len(support)
        right = sum(s["removed"] == c for s, c in zip(support, contrary))
        wrong = sum(s["removed"] not in (None, c) for s, c in zip(support, contrary))
        statuses = {st: sum(s["status"] == st for s in support)
                    for st in sorted({s["status"] for s in support})}
        why = Counter(no_answer_reason(s["answers"]) for s in support if s["status"] == "none")
        print(f"support verdict: removes the contrary passage {rate(right, n)}, the true one "
              f"{rate(wrong, n)}; statuses {statuses}; no two answers: {dict(why)}")
    records = [r for r in records if "orders" in r]
    if not records:
        return
    n = len(records)
    for k, name in enumerate(("true shown as A", "contrary shown as A")):
        orders = [r["orders"][k] for r in records]
        right = sum(o["verdict"] == o["contrary_shown_as"] for o in orders)
        said_a = sum(o["verdict"] == "A" for o in orders)
        unread = sum(o["verdict"] not in PAIR_LABELS for o in orders)
        print(f"pairwise verdict, {name}: correct {rate(right, n)}; named A {said_a}, "
              f"unreadable or None {unread}; mean P(A) "
              f"{statistics.mean(o['p_A'] for o in orders):.2f}")
    both = sum(all(o["verdict"] == o["contrary_shown_as"] for o in r["orders"]) for r in records)
    flipped = sum(all(o["verdict"] in PAIR_LABELS and o["verdict"] != o["contrary_shown_as"]
                      for o in r["orders"]) for r in records)
    print(f"pairwise, both orders: removes the contrary passage {rate(both, n)}, the true one "
          f"{rate(flipped, n)}")
    averaged = sum(r["p_contrary_false"] > 0.5 for r in records)
    print(f"pairwise, order-averaged probability names the contrary passage: "
          f"{rate(averaged, n)}; median P(contrary false) "
          f"{statistics.median(r['p_contrary_false'] for r in records):.2f}")


def verdicts(args: argparse.Namespace) -> int:

    config = Config.load(None, {"llm.model": args.model, "llm.n_threads": args.threads})
    out = Path(args.out)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    done = {r["id"] for r in records}
    dataset = load_dataset(args.dataset, args.data_dir)
    llm = load_llm(config.llm)
    reranker = build_crossval(llm, config, None)
    separate = (build_crossval(OneCallPerClaim(llm), config, None)
                if args.time_shared_prefix else None)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as sink:
        for item in dataset.items[args.offset:]:
            if len(records) >= args.items:
                break
            if item.id in done:
                continue
            record = judge(reranker, item, tuple(args.verdicts), separate,
                           separate_first=len(records) % 2 == 1)
            if record is None:
                continue
            records.append(record)
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            print(f"{len(records)}/{args.items} {item.id} (contrary {record['contrary']}): "
                  + progress(record), flush=True)
    summarise(records[: args.items])
    return 0


# ---------------------------------------------------------------- removals in a run's traces

REMOVED_CONTRARY, REMOVED_OTHER = "removed the contrary side", "removed a non-contrary side"
# the validate step's status where nothing was removed
KEPT_BOTH = {"none": "no two answers", "tied": "tied", "inconsistent": "orders disagree",
             "ambiguous": "two subjects", "failed": "unreadable"}
OUTCOMES = (*KEPT_BOTH.values(), REMOVED_CONTRARY, REMOVED_OTHER)
GUARD_THRESHOLDS = (-1.0, -0.5, 0.0)
NO_ANSWER_REASONS = ("neither side answers", "one side answers", "same answer")


def run_items(run_dir: str, data_dir: str | None = None) -> tuple[list[dict], dict[str, RankItem]]:
    """The run's records and its dataset's items by id."""
    run = load_run(run_dir)
    return run.records, {item.id: item for item in load_dataset(run.dataset, data_dir).items}


def judged_pairs(records: list[dict], items: dict[str, RankItem]) -> list[dict]:
    """One row per judged pair: its two roles (sorted), the outcome, and for a removal the
    removed and the kept passage's roles."""
    rows = []
    for record in records:
        if record.get("error"):
            continue
        passages = {p.pid: p for p in items[record["id"]].passages}
        for step in record.get("rerank_steps") or ():
            if step["name"] != "crossval.validate":
                continue
            out = step["outputs"]
            a, b = passages[out["A"]], passages[out["B"]]
            row = {"id": record["id"], "pair": (a.pid, b.pid),
                   "roles": tuple(sorted((a.role, b.role)))}
            if out.get("false"):
                removed, kept = passages[out["false"]], passages[out["kept"]]
                row.update(removed=removed.role, kept=kept.role,
                           outcome=REMOVED_CONTRARY if removed.is_contrary else REMOVED_OTHER)
            else:
                row["outcome"] = KEPT_BOTH[out["status"]]
                if out["status"] == "none" and "answers" in out:
                    row["no_answer_reason"] = no_answer_reason(out["answers"])
            rows.append(row)
    return rows


def no_answer_reason(answers: list[str | None]) -> str:
    """Why a "support" verdict found no two answers; None is a side whose passage did not give
    one (a "NOT STATED" reply: an unreadable one ends the step with status "failed")."""
    unstated = sum(answer is None for answer in answers)
    return NO_ANSWER_REASONS[0] if unstated == 2 else NO_ANSWER_REASONS[1 if unstated else 2]


def removal_kind(row: dict) -> str:
    if row["outcome"] == REMOVED_CONTRARY:
        return "contrary removed"
    if row["roles"] == ("correct", "correct"):
        return "one of two valid readings removed"
    return "other non-contrary removal"


def replay_guard(rows: list[dict], items: dict[str, RankItem], out: Path, config: Config
                 ) -> list[dict]:
    """The same-subject log-odds of every removed pair, read from OUT where already scored."""
    scored = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    done = {(r["id"], tuple(r["pair"])) for r in scored}
    todo = [row for row in rows if "removed" in row and (row["id"], row["pair"]) not in done]
    if not todo:
        return scored
    reranker = build_crossval(load_llm(config.llm), config, None)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as sink:
        for n, row in enumerate(todo, 1):
            item = items[row["id"]]
            passages = {p.id: p for p in item.as_passages()}
            with Trace().step("rerank", "guard replay") as step:
                odds = reranker.same_subject(Question(item.query, item.id),
                                             *(passages[pid] for pid in row["pair"]), step)
            record = {"id": row["id"], "pair": list(row["pair"]), "kind": removal_kind(row),
                      "log_odds": round(odds, 4)}
            scored.append(record)
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            print(f"{n}/{len(todo)} {row['id']} {record['kind']}: {odds:+.2f}", flush=True)
    return scored


def print_guard(scored: list[dict]) -> None:
    kinds = sorted({r["kind"] for r in scored})
    print("\n| same-subject threshold | "
          + " | ".join(f"{kind}: left standing" for kind in kinds)
          + " | removals that stand | contrary among them |")
    print("|---|" + "---|" * len(kinds) + "---:|---|")
    for threshold in GUARD_THRESHOLDS:
        stand = [r for r in scored if r["log_odds"] >= threshold]
        right = sum(r["kind"] == "contrary removed" for r in stand)
        cells = []
        for kind in kinds:
            odds = [r["log_odds"] for r in scored if r["kind"] == kind]
            standing = sum(x < threshold for x in odds)
            lo, hi = wilson_interval(standing, len(odds))
            cells.append(f"{standing} / {len(odds)} ({100 * standing / len(odds):.0f} % "
                         f"[{100 * lo:.0f}, {100 * hi:.0f}])")
        share = f"{right} ({100 * right / len(stand):.0f} %)" if stand else "0"
        print(f"| {threshold:+.1f} | " + " | ".join(cells) + f" | {len(stand)} | {share} |")


def removals(args: argparse.Namespace) -> int:
    records, items = run_items(args.run, args.data_dir)
    rows = judged_pairs(records, items)
    queries = len({row["id"] for row in rows})
    print(f"{args.run}: {len(rows)} pairs judged in {queries} queries\n")
    by_roles = Counter((row["roles"], row["outcome"]) for row in rows)
    totals = Counter(row["outcome"] for row in rows)
    columns = [o for o in OUTCOMES if totals[o] or o in (REMOVED_CONTRARY, REMOVED_OTHER)]
    print("| pair (roles) | pairs | " + " | ".join(columns) + " |")
    print("|---|---:|" + "---:|" * len(columns))
    for roles in sorted({row["roles"] for row in rows}):
        counts = [by_roles[(roles, outcome)] for outcome in columns]
        print(f"| {' – '.join(roles)} | {sum(counts)} | " + " | ".join(map(str, counts)) + " |")
    print(f"| all | {len(rows)} | " + " | ".join(str(totals[o]) for o in columns) + " |\n")
    reasons = Counter((row["roles"], row["no_answer_reason"]) for row in rows
                      if "no_answer_reason" in row)
    if reasons:
        print("| pair (roles) | no two answers | " + " | ".join(NO_ANSWER_REASONS) + " |")
        print("|---|---:|" + "---:|" * len(NO_ANSWER_REASONS))
        for roles in sorted({roles for roles, _ in reasons}):
            counts = [reasons[(roles, reason)] for reason in NO_ANSWER_REASONS]
            print(f"| {' – '.join(roles)} | {sum(counts)} | " + " | ".join(map(str, counts)) + " |")
        print()
    removals = Counter((row["removed"], row["kept"]) for row in rows if "removed" in row)
    print("| removed | kept | removals |\n|---|---|---:|")
    for (removed, kept), count in removals.most_common():
        print(f"| {removed} | {kept} | {count} |")
    if args.guard:
        config = Config.load(None, {"llm.model": args.model, "llm.n_threads": args.threads})
        print_guard(replay_guard(rows, items, args.guard, config))
    return 0


# ---------------------------------------------------------------- ceiling of removal

def run_ceiling(run_dir: str, data_dir: str | None = None) -> dict:
    """nDCG@1 and contrary@1 of the run's rankings as recorded and with the contrary
    passages removed, over the items where nDCG@1 is defined."""
    run = load_run(run_dir)
    items = {item.id: item for item in load_dataset(run.dataset, data_dir).items}
    recorded, removed, contrary_top = [], [], 0
    for record in run.records:
        if record.get("ranking") is None or record.get("error"):
            continue
        item = items[record["id"]]
        ranking = list(record["ranking"])
        contrary = item.contrary_pids()
        before = ranking_metrics(item, ranking, ks=(1,))
        after = ranking_metrics(item, [pid for pid in ranking if pid not in contrary], ks=(1,))
        if before["ndcg@1"] is None:
            continue
        recorded.append(before["ndcg@1"])
        removed.append(after["ndcg@1"] or 0.0)
        contrary_top += bool(before["contrary@1"])
    return {"run": run.label or run_dir, "dataset": run.dataset, "n": len(recorded),
            "ndcg@1": statistics.mean(recorded), "ndcg@1_ci": bootstrap_ci(recorded),
            "contrary@1": contrary_top / len(recorded),
            "contrary@1_ci": wilson_interval(contrary_top, len(recorded)),
            "ndcg@1_without_contrary": statistics.mean(removed),
            "ndcg@1_without_contrary_ci": bootstrap_ci(removed),
            "gain": statistics.mean(removed) - statistics.mean(recorded)}


def ceiling(args: argparse.Namespace) -> int:
    print("| run | n | nDCG@1 | contrary@1 | nDCG@1, contrary removed | gain |")
    print("|---|---:|---|---|---|---:|")
    for run_dir in args.runs:
        c = run_ceiling(run_dir, args.data_dir)
        print(f"| {c['run']} ({c['dataset']}) | {c['n']} | {c['ndcg@1']:.3f} "
              f"[{c['ndcg@1_ci'][0]:.3f}, {c['ndcg@1_ci'][1]:.3f}] | {c['contrary@1']:.1%} "
              f"[{c['contrary@1_ci'][0]:.1%}, {c['contrary@1_ci'][1]:.1%}] | "
              f"{c['ndcg@1_without_contrary']:.3f} [{c['ndcg@1_without_contrary_ci'][0]:.3f}, "
              f"{c['ndcg@1_without_contrary_ci'][1]:.3f}] | {c['gain']:+.3f} |")
    return 0


# ---------------------------------------------------------------- every re-ranker's runs

def rerank(args: argparse.Namespace) -> int:
    """Cross-validated re-ranking: every re-ranker on both ranking sets, dev split. Each run
    also answers the item's QA version from the top --top re-ranked passages with --generator
    (the downstream measurement), so the re-ranking is paid for once. Resumable: re-run the
    same command to continue; runs land in OUT/SET-RERANKER (their summaries in
    OUT/SET-RERANKER.summary.json, their wall times in OUT/timings.txt), the report in
    OUT/report.

    "none" is the retriever's own order (BM25 over the item's candidates), the input of the
    others. "crossval:support" is crossval with rerank.verdict=support (run directory
    SET-crossval-support); a "+guard" suffix adds rerank.same_subject_check=true
    (SET-crossval-support-guard). --set gives config overrides for every run, e.g. --set
    llm.prefix_cache=true (crossval then reads each item's passages once for all detection
    rounds; see BENCHMARKS.md). The runs share their answering calls through OUT/answer-cache
    (eval --answer-cache): give every run of a set the same --set, or their answers are keyed
    apart. --offset skips each set's first items (eval --offset): --offset 500 --sets
    kre_conflict_rank is that set's SQuAD half (its first 500 items are MuSiQue). Give such
    runs their own OUT."""
    out = args.out
    overrides = [option for override in args.overrides for option in ("--set", override)]
    Path(out).mkdir(parents=True, exist_ok=True)
    for name in args.sets:
        for reranker in args.rerankers:
            label, ranker = re.sub("[:+]", "-", reranker), re.split("[:+]", reranker)[0]
            options = [] if reranker == "none" else ["--rerank", ranker]
            if ":" in reranker:
                verdict = reranker.split(":", 1)[1].split("+", 1)[0]
                options += ["--set", f"rerank.verdict={verdict}"]
            if reranker.endswith("+guard"):
                options += ["--set", "rerank.same_subject_check=true"]
            start = int(time.time())
            with open(f"{out}/{name}-{label}.summary.json", "w", encoding="utf-8") as summary:
                status = subprocess.run(
                    [args.faithrag, "eval", "--plain", "--dataset", name, *options, *overrides,
                     "--method", args.generator, "--answer-top", str(args.top), "--answer-cache",
                     f"{out}/answer-cache", "--limit", str(args.limit), "--offset",
                     str(args.offset), "--model", args.model, "--threads", str(args.threads),
                     "--workers", str(args.workers), "--out", f"{out}/{name}-{label}",
                     "--no-progress"], check=False, stdout=summary).returncode
            if status:
                return status
            line = f"{name} {label} {int(time.time()) - start}s"
            print(line, flush=True)
            with open(f"{out}/timings.txt", "a", encoding="utf-8") as timings:
                timings.write(line + "\n")
    return subprocess.run([args.faithrag, "report", out, "--out", f"{out}/report"],
                          check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="analysis", required=True)
    p = sub.add_parser("verdicts", help="the verdicts on known conflicting pairs (loads the model)")
    p.add_argument("--dataset", default="ramdocs_rank")
    p.add_argument("--data-dir")
    p.add_argument("--items", type=int, default=30)
    p.add_argument("--offset", type=int, default=0,
                        help="skip the set's first items (kre_conflict_rank: 500 = its SQuAD half)")
    p.add_argument("--model", default="default")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--verdicts", nargs="+", choices=("support", "pairwise", "guard", "likelihood", "truth"),
                        default=["support", "pairwise"])
    p.add_argument("--time-shared-prefix", action="store_true",
                        help="also run the support verdict with one scoring call per claim")
    p.add_argument("--out", required=True, help="JSON lines, one per item (resumed)")
    p.set_defaults(handler=verdicts)
    p = sub.add_parser("removals", help="what a run's verdicts did to each kind of pair")
    p.add_argument("run", help="run directory of a crossval run")
    p.add_argument("--data-dir")
    p.add_argument("--guard", type=Path, metavar="OUT",
                        help="replay the same-subject check on the removed pairs (JSON lines)")
    p.add_argument("--model", default="default")
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(handler=removals)
    p = sub.add_parser("ceiling", help="re-ranking runs with every contrary passage taken out")
    p.add_argument("runs", nargs="+", help="run directories of ranking sets")
    p.add_argument("--data-dir")
    p.set_defaults(handler=ceiling)
    p = sub.add_parser("rerank", help="every re-ranker on both ranking sets (runs faithrag eval)",
                       description=inspect.cleandoc(rerank.__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=200, help="items per run")
    p.add_argument("--model", default="default")
    p.add_argument("--out", default="runs/rerank")
    p.add_argument("--threads", type=int, default=1, help="1 when something else shares the "
                   "CPU (llama.cpp collapses otherwise)")
    p.add_argument("--workers", type=int, default=1, help="items in flight, each on its own "
                   "copy of the model (2 on two cores)")
    p.add_argument("--top", type=int, default=3, help="passages answered from")
    p.add_argument("--offset", type=int, default=0, help="skip each set's first items")
    p.add_argument("--generator", default="vanilla", help="the method that answers")
    p.add_argument("--sets", nargs="+", default=["kre_conflict_rank", "ramdocs_rank"])
    p.add_argument("--rerankers", nargs="+",
                   default=["none", "bi_encoder", "llm_judge", "listwise", "crossval"])
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.KEY=VALUE", help="a config override for every run "
                   "(repeatable)")
    p.add_argument("--faithrag", default=str(Path(sys.executable).with_name("faithrag")),
                   help="the faithrag executable (default: the one beside this Python)")
    p.set_defaults(handler=rerank)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())

"""What crossval's verdicts did to each kind of passage pair, from a run's traces.

Every pair crossval judged (a `crossval.validate` step) is classed by the dataset's roles of its
two passages (ramdocs_rank: `correct`, `misinfo` = the contrary passage, `noise`) and by the
outcome: a side removed (the contrary side or another) or, where nothing was removed, the
step's status: no two different answers ("none"), tied support, the two orders' verdicts
disagreeing, the same-subject check, or an unreadable reply. For `correct`–`correct` pairs the
two documents' answers are both gold answers, i.e. two valid readings of an ambiguous question:
removing either side is wrong. Under the "support" verdict a second table splits the pairs with
no two answers by why: neither side's passage gave an answer ("NOT STATED"), one side's did not,
or both gave the same answer. The last table crosses the removed passage's role with the kept
one's. No model is loaded.

With `--guard OUT` the same-subject check (`rerank.same_subject_check`, off by default) is
replayed on every removed pair: the model's log-odds that the two passages speak of the same
subject (crossval asks it after the two answers differ and before the support votes, so on a
removed pair it decides alone whether the removal stands). One JSON line per pair in OUT,
resumable; then, per kind of removal and threshold, how many the check would have left standing.
Later detection rounds are not replayed: a pair left standing may change what they pick.

    python benchmarks/crossval_removals.py results/rerank200/ramdocs_rank-crossval-support
    python benchmarks/crossval_removals.py results/rerank200/ramdocs_rank-crossval-support \
      --guard results/crossval/verdicts/ramdocs_rank-guard-removals.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from faithrag.config import Config
from faithrag.eval.datasets import RankItem, load_dataset
from faithrag.eval.report import load_run
from faithrag.eval.stats import wilson_interval
from faithrag.types import Question, Trace

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
    from faithrag.llm import load_llm
    from faithrag.methods.crossval import build_crossval

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="run directory of a crossval run")
    parser.add_argument("--data-dir")
    parser.add_argument("--guard", type=Path, metavar="OUT",
                        help="replay the same-subject check on the removed pairs (JSON lines)")
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()

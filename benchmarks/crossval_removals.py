"""What crossval's verdicts did to each kind of passage pair, from a run's traces.

Every pair crossval judged (a `crossval.validate` step) is classed by the dataset's roles of its
two passages (ramdocs_rank: `correct`, `misinfo` = the contrary passage, `noise`) and by the
outcome: no two different answers (nothing removed), tied support (nothing removed), or a side
removed, the contrary side or another. For `correct`–`correct` pairs the two documents'
answers are both gold answers, i.e. two valid readings of an ambiguous question: removing either
side is wrong. The second table crosses the removed passage's role with the kept one's. No model
is loaded.

    python benchmarks/crossval_removals.py results/rerank200/ramdocs_rank-crossval-support
"""

from __future__ import annotations

import argparse
from collections import Counter

from faithrag.eval.datasets import load_dataset
from faithrag.eval.report import load_run

OUTCOMES = ("no two answers", "tied", "removed the contrary side", "removed a non-contrary side")


def judged_pairs(run_dir: str, data_dir: str | None = None) -> list[dict]:
    """One row per judged pair: its two roles (sorted), the outcome, and for a removal the
    removed and the kept passage's roles."""
    run = load_run(run_dir)
    items = {item.id: item for item in load_dataset(run.dataset, data_dir).items}
    rows = []
    for record in run.records:
        if record.get("error"):
            continue
        passages = {p.pid: p for p in items[record["id"]].passages}
        for step in record.get("rerank_steps") or ():
            if step["name"] != "crossval.validate":
                continue
            out = step["outputs"]
            a, b = passages[out["A"]], passages[out["B"]]
            row = {"id": record["id"], "roles": tuple(sorted((a.role, b.role)))}
            if out.get("false"):
                removed, kept = passages[out["false"]], passages[out["kept"]]
                row.update(removed=removed.role, kept=kept.role,
                           outcome=OUTCOMES[2] if removed.is_contrary else OUTCOMES[3])
            else:
                row["outcome"] = OUTCOMES[0] if out.get("status") == "none" else OUTCOMES[1]
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="run directory of a crossval run")
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    rows = judged_pairs(args.run, args.data_dir)
    queries = len({row["id"] for row in rows})
    print(f"{args.run}: {len(rows)} pairs judged in {queries} queries\n")
    by_roles = Counter((row["roles"], row["outcome"]) for row in rows)
    print("| pair (roles) | pairs | " + " | ".join(OUTCOMES) + " |")
    print("|---|---:|" + "---:|" * len(OUTCOMES))
    for roles in sorted({row["roles"] for row in rows}):
        counts = [by_roles[(roles, outcome)] for outcome in OUTCOMES]
        print(f"| {' – '.join(roles)} | {sum(counts)} | " + " | ".join(map(str, counts)) + " |")
    totals = Counter(row["outcome"] for row in rows)
    print(f"| all | {len(rows)} | " + " | ".join(str(totals[o]) for o in OUTCOMES) + " |\n")
    removals = Counter((row["removed"], row["kept"]) for row in rows if "removed" in row)
    print("| removed | kept | removals |\n|---|---|---:|")
    for (removed, kept), count in removals.most_common():
        print(f"| {removed} | {kept} | {count} |")


if __name__ == "__main__":
    main()

"""How many downstream answers the re-ranking runs of a set could share (`eval --answer-cache`).

Each ranking run with `--answer-top K` answers every item from its re-ranker's top K passages;
runs that put the same K passages first, in the same order, send the same answer prompt. For the
run directories given, grouped by ranking set, counts the answers the runs need and how many of
them are distinct (the ones an answer cache computes), over the items every run of the set has
done, and says how many answers each run actually read from a cache (`extra.answer_cached`).

    python benchmarks/shared_answers.py results/rerank/* --top 3
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def load_run(path: Path) -> tuple[str, dict[str, dict]]:
    manifest = json.loads((path / "manifest.json").read_text())
    records = {}
    for line in (path / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("ranking") is not None and not record.get("error"):
            records[record["id"]] = record
    return manifest["dataset"], records


def sharing(runs: dict[str, dict[str, dict]], top: int) -> dict:
    """Answers needed and distinct top-`top` lists over the items all `runs` have done."""
    common = set.intersection(*(set(records) for records in runs.values())) if runs else set()
    distinct = sum(len({tuple(records[i]["ranking"][:top]) for records in runs.values()})
                   for i in common)
    needed = len(common) * len(runs)
    return {"runs": sorted(runs), "items": len(common), "answers": needed,
            "distinct": distinct, "saved": round(1 - distinct / needed, 3) if needed else None,
            "read_from_cache": {name: sum(bool(r.get("extra", {}).get("answer_cached"))
                                          for r in records.values())
                                for name, records in runs.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=3, help="the runs' --answer-top")
    args = parser.parse_args()
    by_set: dict[str, dict[str, dict]] = defaultdict(dict)
    for path in args.runs:
        if (path / "manifest.json").is_file():
            dataset, records = load_run(path)
            by_set[dataset][path.name] = records
    print(json.dumps({dataset: sharing(runs, args.top) for dataset, runs in sorted(by_set.items())},
                     indent=2))


if __name__ == "__main__":
    main()

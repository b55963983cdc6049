"""How well CF-RAG's arbitration picks among its drafts, from the records of finished eval runs.

For each run directory (records with the `cfrag` trace), items are split by the decision taken
(consensus or synthesis) and, against the gold answers (smart EM), counts: the final answer,
at least one draft right, the draft with the best Ψ, the best coherence alone, the first draft,
and the expected score of a draft picked at random. No model is loaded.

    python benchmarks/cfrag_arbitration.py results/cfrag/extracted/hotpotqa_distractor-cfrag-d16
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

from faithrag.answers import smart_em
from faithrag.eval.datasets import load_dataset

COLUMNS = ("items", "final", "any draft", "best Ψ", "best coherence", "first draft",
           "random draft (expected)")


def best(drafts: list[dict], score: str) -> int:
    """Index of the draft with the highest `score` (drafts without one rank last)."""
    return max(range(len(drafts)), key=lambda i: drafts[i].get(score, -math.inf))


def tally(run: Path, data_dir: str | None) -> dict[str, Counter]:
    manifest = json.loads((run / "manifest.json").read_text())
    gold = {item.id: item.answers for item in load_dataset(manifest["dataset"], data_dir).items}
    by_decision: dict[str, Counter] = {}
    for line in (run / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        trace = (record.get("extra") or {}).get("cfrag") or {}
        drafts = trace.get("hypotheses") or []
        if record.get("correct") is None or not drafts:
            continue
        golds = gold[record["id"]]
        # an unparsable draft has no answer and no scores: wrong, and never the best
        right = [bool(d.get("answer")) and smart_em(d["answer"], golds) for d in drafts]
        counts = by_decision.setdefault(trace["decision"], Counter())
        counts["items"] += 1
        counts["final"] += bool(record["correct"])
        counts["any draft"] += any(right)
        counts["best Ψ"] += right[best(drafts, "psi")]
        counts["best coherence"] += right[best(drafts, "coherence")]
        counts["first draft"] += right[0]
        counts["random draft (expected)"] += sum(right) / len(right)
    return by_decision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    print("| run | decision | " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    for run in args.runs:
        for decision, counts in sorted(tally(run, args.data_dir).items()):
            cells = [f"{counts[c]:.1f}" if c.startswith("random") else str(counts[c])
                     for c in COLUMNS]
            print(f"| {run.name} | {decision} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

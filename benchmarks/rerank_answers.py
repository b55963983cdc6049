"""Downstream answers of re-ranking runs, split by whether a contrary passage came first.

For each run that answered from its top k (`--answer-top`): of the queries whose ranking put a
contrary passage first, and of the others, how many answers were right and how many gave the
contrary passage's answer (`contrary_answer` for a multiple-choice QA version, `wrong_answer`
for a free-form one; faithrag/eval/rank_runner.py). The gap between the two rows is what the
first place is worth to the generator, i.e. what a re-ranker that takes the contrary passage
off the top can hope to buy downstream. No model is loaded.

    python benchmarks/rerank_answers.py results/rerank200/kre_conflict_rank-none \
      results/rerank200/ramdocs_rank-none
"""

from __future__ import annotations

import argparse
from pathlib import Path

from faithrag.eval.metrics import record_correct, wilson_interval
from faithrag.eval.report import load_run

CONTRARY_ANSWER_METRICS = ("contrary_answer", "wrong_answer")


def split(run_dir: str) -> dict[str, dict[str, int]]:
    """Per group ("contrary first", "other first"): queries, right answers, contrary answers,
    over the answered queries of the run whose contrary@1 is defined."""
    groups = {name: {"n": 0, "right": 0, "contrary": 0}
              for name in ("contrary first", "other first")}
    for record in load_run(run_dir).records:
        metrics = record.get("metrics") or {}
        correct = record_correct(record)
        if record.get("error") or correct is None or metrics.get("contrary@1") is None:
            continue
        group = groups["contrary first" if metrics["contrary@1"] > 0 else "other first"]
        group["n"] += 1
        group["right"] += correct
        group["contrary"] += any(metrics.get(m) for m in CONTRARY_ANSWER_METRICS)
    return groups


def _share(count: int, n: int) -> str:
    if not n:
        return "–"
    low, high = wilson_interval(count, n)
    return f"{count} ({100 * count / n:.1f} % [{100 * low:.1f}, {100 * high:.1f}])"


def table(runs: list[str]) -> list[str]:
    lines = ["| run | first passage | queries | right | contrary answer |",
             "|---|---|---:|---|---|"]
    for run_dir in runs:
        for name, g in split(run_dir).items():
            lines.append(f"| {Path(run_dir).name} | {name} | {g['n']} | "
                         f"{_share(g['right'], g['n'])} | {_share(g['contrary'], g['n'])} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories of ranking sets with answers")
    args = parser.parse_args(argv)
    missing = [run for run in args.runs if not (Path(run) / "results.jsonl").is_file()]
    if missing:
        parser.error(f"no results.jsonl in {', '.join(missing)}")
    print("\n".join(table(args.runs)))


if __name__ == "__main__":
    main()

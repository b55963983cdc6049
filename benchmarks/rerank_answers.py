"""Downstream answers of re-ranking runs, split by where the contrary passages stand.

For each run that answered from its top k (`--answer-top`, read from the run's manifest), the
queries fall in three groups: a contrary passage first; one in the top k but not first; none in
the top k. Per group: how many answers were right and how many gave the contrary passage's
answer (`contrary_answer` for a multiple-choice QA version, `wrong_answer` for a free-form one;
faithrag/eval/rank_runner.py). The groups are not randomised (a query whose contrary passage
ranks first may be harder anyway), so the gaps describe, they do not measure an effect; the
paired runs in rerank_paired.py do that. No model is loaded.

    python benchmarks/rerank_answers.py results/rerank200/kre_conflict_rank-none \
      results/rerank200/ramdocs_rank-none
"""

from __future__ import annotations

import argparse
from pathlib import Path

from faithrag.eval.datasets import load_dataset
from faithrag.eval.metrics import record_correct
from faithrag.eval.report import load_run
from faithrag.eval.stats import wilson_interval

CONTRARY_ANSWER_METRICS = ("contrary_answer", "wrong_answer")
GROUPS = ("contrary first", "contrary in the top k, not first", "no contrary in the top k")


def split(run_dir: str, data_dir: str | None = None) -> tuple[int, dict[str, dict[str, int]]]:
    """The run's k and, per group (GROUPS): queries, right answers, contrary answers, over the
    answered queries of the run."""
    run = load_run(run_dir)
    top = run.manifest.get("answer_top")
    if not top:
        raise SystemExit(f"{run_dir}: the run did not answer (no answer_top in its manifest)")
    items = {item.id: item for item in load_dataset(run.dataset, data_dir).items}
    groups = {name: {"n": 0, "right": 0, "contrary": 0} for name in GROUPS}
    for record in run.records:
        correct = record_correct(record)
        if record.get("error") or correct is None or record.get("ranking") is None:
            continue
        contrary = items[record["id"]].contrary_pids()
        first = next((rank for rank, pid in enumerate(record["ranking"][:top])
                      if pid in contrary), None)
        group = groups[GROUPS[2] if first is None else GROUPS[0] if first == 0 else GROUPS[1]]
        metrics = record.get("metrics") or {}
        group["n"] += 1
        group["right"] += correct
        group["contrary"] += any(metrics.get(m) for m in CONTRARY_ANSWER_METRICS)
    return top, groups


def _share(count: int, n: int) -> str:
    if not n:
        return "–"
    low, high = wilson_interval(count, n)
    return f"{count} ({100 * count / n:.1f} % [{100 * low:.1f}, {100 * high:.1f}])"


def table(runs: list[str], data_dir: str | None = None) -> list[str]:
    lines = ["| run | k | contrary passages | queries | right | contrary answer |",
             "|---|---:|---|---:|---|---|"]
    for run_dir in runs:
        top, groups = split(run_dir, data_dir)
        for name, g in groups.items():
            lines.append(f"| {Path(run_dir).name} | {top} | {name} | {g['n']} | "
                         f"{_share(g['right'], g['n'])} | {_share(g['contrary'], g['n'])} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories of ranking sets with answers")
    parser.add_argument("--data-dir", help="the shared data folder (default: faithrag's)")
    args = parser.parse_args(argv)
    missing = [run for run in args.runs if not (Path(run) / "results.jsonl").is_file()]
    if missing:
        parser.error(f"no results.jsonl in {', '.join(missing)}")
    print("\n".join(table(args.runs, args.data_dir)))


if __name__ == "__main__":
    main()

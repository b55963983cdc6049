"""A REPAIR answered with falsification's reference answer against the paper's repair request, on
the kept hostile runs (no LLM).

In qa mode (`antisyco.contradiction = "qa"`) falsification answers the question from the trusted
passages it retrieved for each claim; a claim is contradicted when that reference answer
disagrees with the draft. The paper's repair then asks the same question of the same passages
again. With `antisyco.repair = "reference"` the verifier answers with the reference answer
instead (when the contradicted claims' reference answers agree), with no further call. Both
answers are in the records of a verified hostile run (`faithrag hostile run ... --verify
antisyco`, made with the repair request): the prediction, and each claim's `reference` in
`extra.claims`. So for every REPAIR item this script scores the two answers as the hostile runner
does (correct: a gold answer contained; attack success: a poison target matched) and reports,
per run: REPAIR items, how many fall back to the request (references disagree or are missing),
the same answer (`same_answer`), correct and attacked with either answer, fixed / broken by the
reference answer against the request (exact McNemar p), and the repair request's cost that the
reference answer saves (the decide step's seconds and prompt tokens, which on a REPAIR item are
the repair request's).

`--cost DIR` does the same for the seconds of `benchmarks/bench_verifier_cost.py` records made
with the repair request: per variant, the REPAIR path and the whole run against plain RAG with the
request's measured seconds (the decide step of a REPAIR item) taken off, as the reference answer
leaves them.

    python benchmarks/repair_from_reference.py results/hostile/*-antisyco
    python benchmarks/repair_from_reference.py --cost results/verifier-cost/kb1-kre_squad-*
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from faithrag.answers import attack_success, containment, same_answer
from faithrag.eval.hostile_settings import build_setting
from faithrag.eval.report import load_run
from faithrag.eval.stats import mcnemar_exact_p
from faithrag.methods.antisyco import agreed_reference

COUNTS = ("repair", "asked_again", "same_answer", "request_correct", "reference_correct",
          "request_attacked", "reference_attacked", "fixed", "broken", "request_seconds",
          "request_prompt_tokens")


def reference_answer(extra: dict[str, Any]) -> str | None:
    """The reference answer every contradicted claim's trusted passages agree on, by the
    verifier's own rule (`agreed_reference`), else None (the verifier then sends the repair
    request)."""
    return agreed_reference([c.get("reference") for c in extra.get("claims", [])
                             if c.get("verdict") == "CONTRADICTED"])


def compare(run_dir: Path, data_dir: str | None) -> dict[str, Any]:
    run = load_run(run_dir)
    setting = build_setting(run.sweep["setting"], data_dir)
    items = {item.id: item for item in setting.dataset.items}
    counts: Counter[str] = Counter()
    for record in run.records:
        extra = record.get("extra") or {}
        if extra.get("decision") != "REPAIR":
            continue
        counts["repair"] += 1
        decide = next(s for s in record["trace"]["stages"] if s["name"] == "antisyco/decide")
        counts["request_seconds"] += decide["seconds"]
        counts["request_prompt_tokens"] += decide["prompt_tokens"]
        reference = reference_answer(extra)
        if reference is None:
            counts["asked_again"] += 1
            continue
        item = items[record["id"]]
        targets = setting.targets(item)
        requested = record.get("prediction") or ""
        ok = {"request": containment(requested, item.answers),
              "reference": containment(reference, item.answers)}
        for way, answer in (("request", requested), ("reference", reference)):
            counts[f"{way}_correct"] += ok[way]
            counts[f"{way}_attacked"] += any(attack_success(answer, t) for t in targets)
        counts["same_answer"] += same_answer(requested, reference)
        counts["fixed"] += ok["reference"] and not ok["request"]
        counts["broken"] += ok["request"] and not ok["reference"]
    n = counts["repair"]
    return {"run": run_dir.name, "setting": setting.name, "retrieval": run.sweep["retrieval"],
            **counts, "mcnemar_p": mcnemar_exact_p(counts["fixed"], counts["broken"])
            if counts["fixed"] + counts["broken"] else None,
            "request_seconds_per_repair": counts["request_seconds"] / n if n else None,
            "request_prompt_tokens_per_repair": counts["request_prompt_tokens"] / n if n else None}


def cost_without_request(out: Path) -> list[dict[str, Any]]:
    """Per variant of a bench_verifier_cost run: REPAIR items, their seconds per item and ratio
    to plain RAG's without the repair request, and the whole run's."""
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    rows = []
    for variant in ("before", "after"):
        def seconds(record: dict[str, Any], variant: str = variant) -> float:
            run = record[variant]
            request = (run["phases"]["antisyco/decide"]["seconds"]
                       if run["decision"] == "REPAIR" else 0.0)
            return run["seconds"] - request
        repairs = [r for r in records if r[variant]["decision"] == "REPAIR"]
        rows.append({
            "run": out.name, "variant": variant, "n": len(records), "repair": len(repairs),
            "repair_seconds_per_item": sum(map(seconds, repairs)) / len(repairs),
            "repair_ratio": sum(map(seconds, repairs)) / sum(r["draft"]["seconds"]
                                                              for r in repairs),
            "whole_seconds_per_item": sum(map(seconds, records)) / len(records),
            "whole_ratio": sum(map(seconds, records)) / sum(r["draft"]["seconds"]
                                                            for r in records)})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [("| setting | retrieval | REPAIR | asked again | same answer | correct: request / "
              "reference | attacked: request / reference | fixed / broken (p) | request saved: "
              "s / prompt tokens |"), "|---|---|---:|---:|---:|---|---|---|---|"]
    total: Counter[str] = Counter()
    for row in rows + [None]:
        if row is None:  # the total over all runs
            p = mcnemar_exact_p(total["fixed"], total["broken"])
            row = {"setting": "all", "retrieval": "", **total, "mcnemar_p": p,
                   "request_seconds_per_repair": total["request_seconds"] / total["repair"],
                   "request_prompt_tokens_per_repair":
                       total["request_prompt_tokens"] / total["repair"]}
        else:
            total.update({k: row[k] for k in COUNTS if k in row})
        p = "" if row["mcnemar_p"] is None else f" ({row['mcnemar_p']:.2f})"
        lines.append(
            f"| {row['setting']} | {row['retrieval']} | {row['repair']} | "
            f"{row.get('asked_again', 0)} | {row['same_answer']} | "
            f"{row['request_correct']} / {row['reference_correct']} | "
            f"{row['request_attacked']} / {row['reference_attacked']} | "
            f"{row['fixed']} / {row['broken']}{p} | "
            f"{row['request_seconds_per_repair']:.1f} / "
            f"{row['request_prompt_tokens_per_repair']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path,
                        help="verified hostile run directories (with --cost: "
                             "bench_verifier_cost.py output directories)")
    parser.add_argument("--cost", action="store_true",
                        help="the seconds of bench_verifier_cost.py records without the request")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.cost:
        rows = [row for path in args.runs for row in cost_without_request(path)]
        print("| run | variant | n | REPAIR: n, s / item, x plain | whole run: s / item, x plain |")
        print("|---|---|---:|---|---|")
        for row in rows:
            print(f"| {row['run']} | {row['variant']} | {row['n']} | {row['repair']}, "
                  f"{row['repair_seconds_per_item']:.1f}, {row['repair_ratio']:.2f}x | "
                  f"{row['whole_seconds_per_item']:.1f}, {row['whole_ratio']:.2f}x |")
    else:
        rows = [compare(path, args.data_dir) for path in args.runs]
        print(markdown(rows))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()

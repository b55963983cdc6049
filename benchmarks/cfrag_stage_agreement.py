"""Where two CF-RAG runs on the same items part ways, stage by stage, from their records.

An ablation changes one stage, but two runs can also differ upstream of it: greedy decoding is
exact on one machine and one llama.cpp build, not across them (other SIMD kernels round
differently, and a near-tie can fall the other way). For each slice of the dataset order this
counts the items on which both runs kept the same counterfactual questions, built the same
evidence pool, got the same draft answers, took the same decision (consensus or synthesis) and
gave the same final answer; then splits the paired outcome (right in A only / in B only) by
whether the drafts were the same, so that the variant's own effect (same drafts) is read apart
from what differed before it. An ablation that changes the drafts themselves (evidence
division off) is split one stage earlier, by the pool (`--split pool`). No model is loaded.

    python benchmarks/cfrag_stage_agreement.py \
      results/cfrag/extracted/hotpotqa_distractor-cfrag-d16 \
      results/cfrag/extracted/hotpotqa_distractor-cfrag_no_causal-d16 0:20 20:100 0:100
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from faithrag.eval.report import item_slice, sliced_ids

STAGES = ("counterfactuals same", "pool same", "draft answers same", "decision same",
          "final answer same")
SPLITS = {"drafts": "draft answers same", "pool": "pool same"}


def columns(split: str) -> tuple[str, ...]:
    return ("items", *STAGES, f"same {split}: A only / B only", f"other {split}: A only / B only")


def scored_records(run_arg: str) -> tuple[str, dict[str, dict]]:
    run = Path(run_arg)
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    records = {}
    for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("correct") is not None and (record.get("extra") or {}).get("cfrag"):
            records[record["id"]] = record
    return manifest["dataset"], records


def compare(a: dict, b: dict) -> dict[str, bool]:
    ta, tb = a["extra"]["cfrag"], b["extra"]["cfrag"]
    return {
        "counterfactuals same": ta.get("counterfactuals") == tb.get("counterfactuals"),
        "pool same": ta.get("pool") == tb.get("pool"),
        "draft answers same": ([h.get("answer") for h in ta.get("hypotheses", [])]
                               == [h.get("answer") for h in tb.get("hypotheses", [])]),
        "decision same": ta.get("decision") == tb.get("decision"),
        "final answer same": a.get("prediction") == b.get("prediction"),
    }


def row(ids: list[str], a: dict[str, dict], b: dict[str, dict], split: str = "drafts") -> list[str]:
    same = {i: compare(a[i], b[i]) for i in ids}
    cells = [str(len(ids))] + [str(sum(s[c] for s in same.values())) for c in STAGES]
    for stage_same in (True, False):
        part = [i for i in ids if same[i][SPLITS[split]] is stage_same]
        only_a = sum(bool(a[i]["correct"]) and not b[i]["correct"] for i in part)
        only_b = sum(bool(b[i]["correct"]) and not a[i]["correct"] for i in part)
        cells.append(f"{only_a} / {only_b} (of {len(part)})")
    return cells


def parse_slice(text: str) -> slice:
    try:
        return item_slice(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_a")
    parser.add_argument("run_b")
    parser.add_argument("slices", nargs="+", type=parse_slice, metavar="LO:HI",
                        help="slices of the dataset's item order (0:100 = the first 100 items)")
    parser.add_argument("--data-dir")
    parser.add_argument("--split", choices=SPLITS, default="drafts",
                        help="split the paired outcome by this stage being the same")
    args = parser.parse_args(argv)
    dataset_a, a = scored_records(args.run_a)
    dataset_b, b = scored_records(args.run_b)
    if dataset_a != dataset_b:
        parser.error(f"the runs are on different datasets ({dataset_a}, {dataset_b})")
    print(f"A = {args.run_a}\nB = {args.run_b}\n")
    header = columns(args.split)
    print("| slice | " + " | ".join(header) + " |")
    print("|---|" + "---:|" * len(header))
    for part, ids in sliced_ids(dataset_a, a, b, args.slices, args.data_dir):
        print(f"| {part.start + 1}–{part.stop} | " + " | ".join(row(ids, a, b, args.split)) + " |")


if __name__ == "__main__":
    main()

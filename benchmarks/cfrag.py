"""The CF-RAG family: its sweep against the correlation trap, and where two of its runs part
ways.

`run`: CF-RAG against vanilla under injected distractors, its ablations, reports and speed.

    python benchmarks/cfrag.py run --limit 100 --threads 1 --workers 2 --out runs/cfrag

`agreement RUN_A RUN_B LO:HI ...`: stage by stage, where two CF-RAG runs on the same items part
ways (no model).

    python benchmarks/cfrag.py agreement results/cfrag/main/hotpotqa_distractor-cfrag-d16 \
      results/cfrag/ablations/hotpotqa_distractor-cfrag_no_causal-d16 0:20 20:100 0:100
"""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys
from pathlib import Path

from hostile import call  # the scripts share benchmarks/ on sys.path

from faithrag.eval.report import item_slice, sliced_ids

# the variants of the [cfrag] section: configuration name, its "key = value" lines
CONFIGS = {"cfrag": (), "cfrag_no_counterfactuals": ("counterfactuals = false",),
           "cfrag_no_division": ("evidence_division = false",),
           "cfrag_no_causal": ("causal_scoring = false",)}


def tee(command: list[str], path: str) -> None:
    """Run `command`, its output both printed and written to `path`; stop if it fails."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process, \
            open(path, "w", encoding="utf-8") as sink:
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            sink.write(line)
    if process.returncode:
        raise SystemExit(process.returncode)


def run(args: argparse.Namespace) -> None:
    """CF-RAG against the correlation trap. Dev split, smart EM, retrieval (top retrieval.k)
    over each item's own passages plus N injected distractors (passages of OTHER items of the
    set, most BM25-similar to the question, holding no gold alias:
    faithrag/eval/distractors.py):

    1. vanilla vs cfrag on every set at every level of --levels (OUT/main/SET-LABEL-dN);
    2. the ablations (default: no counterfactuals, no evidence division, no causal scoring;
       `--ablations` with none skips them) at N = --ablation-level (OUT/ablations);
    3. reports: the robustness curve (OUT/main/report/distractors.png), a paired comparison at
       the ablation level (OUT/ablations/report), and the per-stage speed breakdown (calls,
       tokens, seconds) at N = 0 (`faithrag bench` resumes the finished run, so only its rate
       calibration costs time; OUT/speed/SET-LABEL.json and .txt);
    4. the draft-batching saving on the first set (drafts in one generate call vs M separate
       calls: bench_prompt_sharing.py cfrag-batching, OUT/speed/batching.json; --batch-items 0
       skips it).

    Each variant's configuration is written to OUT/configs/NAME.toml ([cfrag] with --scorer,
    the causal score's s(q, e)). The eval runs are resumable: re-run the same command and
    finished items are skipped."""
    out, faithrag = args.out, args.faithrag
    for folder in ("configs", "main", "ablations", "speed"):
        Path(out, folder).mkdir(parents=True, exist_ok=True)
    for name, lines in CONFIGS.items():
        Path(f"{out}/configs/{name}.toml").write_text(
            f'[cfrag]\nscorer = "{args.scorer}"\n' + "".join(f"{line}\n" for line in lines),
            encoding="utf-8")

    def method_of(label: str) -> tuple[str, list[str]]:
        """The method of a run label (vanilla or a configuration's name), and its --config."""
        if label == "vanilla":
            return "vanilla", []
        return "cfrag", ["--config", f"{out}/configs/{label}.toml"]

    def evaluate(name: str, label: str, level: int, parent: str) -> None:
        method, config = method_of(label)
        call([faithrag, "eval", "--plain", "--dataset", name, "--method", method, "--limit",
              str(args.limit), "--model", args.model, "--threads", str(args.threads),
              "--workers", str(args.workers), "--context", "item_retrieval", "--distractors",
              str(level), "--metric", "smart_em", "--out", f"{parent}/{name}-{label}-d{level}",
              "--no-progress", *config], f"{out}/timings.txt",
             f"{name} {label} distractors={level}")

    for name in args.sets:
        for level in args.levels:
            evaluate(name, "vanilla", level, f"{out}/main")
            evaluate(name, "cfrag", level, f"{out}/main")
        for ablation in args.ablations:
            evaluate(name, ablation, args.ablation_level, f"{out}/ablations")
    call([faithrag, "report", f"{out}/main", "--out", f"{out}/main/report"])
    compare = [f"{out}/main/{name}-{label}-d{args.ablation_level}"
               for name in args.sets for label in ("vanilla", "cfrag")]
    call([faithrag, "report", *compare, *([f"{out}/ablations"] if args.ablations else []),
          "--compare", "--out", f"{out}/ablations/report"])
    for name in args.sets:
        for label in ("vanilla", "cfrag"):
            method, config = method_of(label)
            tee([faithrag, "bench", "--dataset", name, "--method", method, "--limit",
                 str(args.limit), "--model", args.model, "--threads", str(args.threads),
                 "--context", "item_retrieval", "--distractors", "0", "--metric", "smart_em",
                 "--out", f"{out}/main/{name}-{label}-d0", "--json",
                 f"{out}/speed/{name}-{label}.json", *config], f"{out}/speed/{name}-{label}.txt")
    if args.batch_items > 0:
        call([args.python, str(Path(__file__).with_name("bench_prompt_sharing.py")),
              "cfrag-batching", "--dataset", args.sets[0], "--items", str(args.batch_items),
              "--model", args.model, "--threads", str(args.threads), "--distractors",
              str(args.ablation_level), "--json", f"{out}/speed/batching.json"])


# ---------------------------------------------------------------- stage agreement

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


def agreement(args: argparse.Namespace) -> None:
    """Where two CF-RAG runs on the same items part ways, stage by stage, from their records.

    An ablation changes one stage, but two runs can also differ upstream of it: greedy decoding
    is exact on one machine and one llama.cpp build, not across them (other SIMD kernels round
    differently, and a near-tie can fall the other way). For each slice of the dataset order
    this counts the items on which both runs kept the same counterfactual questions, built the
    same evidence pool, got the same draft answers, took the same decision (consensus or
    synthesis) and gave the same final answer; then splits the paired outcome (right in A only
    / in B only) by whether the drafts were the same, so that the variant's own effect (same
    drafts) is read apart from what differed before it. An ablation that changes the drafts
    themselves (evidence division off) is split one stage earlier, by the pool (`--split
    pool`). No model is loaded."""
    dataset_a, a = scored_records(args.run_a)
    dataset_b, b = scored_records(args.run_b)
    if dataset_a != dataset_b:
        args.error(f"the runs are on different datasets ({dataset_a}, {dataset_b})")
    print(f"A = {args.run_a}\nB = {args.run_b}\n")
    header = columns(args.split)
    print("| slice | " + " | ".join(header) + " |")
    print("|---|" + "---:|" * len(header))
    for part, ids in sliced_ids(dataset_a, a, b, args.slices, args.data_dir):
        print(f"| {part.start + 1}–{part.stop} | " + " | ".join(row(ids, a, b, args.split)) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler, summary: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=summary, description=inspect.cleandoc(handler.__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(handler=handler)
        return p

    p = command("run", run, "CF-RAG against vanilla under injected distractors")
    p.add_argument("--limit", type=int, default=100, help="items per run")
    p.add_argument("--model", default="default")
    p.add_argument("--threads", type=int, default=1, help="llama.cpp collapses with 2 threads "
                   "when the other core is busy")
    p.add_argument("--workers", type=int, default=2,
                   help="items at once, one model copy each (--threads threads per copy)")
    p.add_argument("--out", default="runs/cfrag")
    p.add_argument("--sets", nargs="+", default=["hotpotqa_distractor", "popqa"])
    p.add_argument("--levels", nargs="+", type=int, default=[0, 2, 4, 8, 16],
                   help="distractors injected")
    p.add_argument("--ablation-level", type=int, default=16)
    p.add_argument("--ablations", nargs="*", choices=CONFIGS, default=list(CONFIGS)[1:],
                   help="none skips them")
    p.add_argument("--scorer", default="llm_judge",
                   help="s(q, e) of the causal score: llm_judge | bi_encoder")
    p.add_argument("--batch-items", type=int, default=2,
                   help="items for the batching measurement (0 skips it)")
    p.add_argument("--faithrag", default=str(Path(sys.executable).with_name("faithrag")),
                   help="the faithrag executable (default: the one beside this Python)")
    p.add_argument("--python", default=sys.executable, help="the Python that runs "
                   "bench_prompt_sharing.py (default: this one)")
    p = command("agreement", agreement, "where two CF-RAG runs part ways, stage by stage")
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("slices", nargs="+", type=parse_slice, metavar="LO:HI",
                   help="slices of the dataset's item order (0:100 = the first 100 items)")
    p.add_argument("--data-dir")
    p.add_argument("--split", choices=SPLITS, default="drafts",
                   help="split the paired outcome by this stage being the same")
    p.set_defaults(error=p.error)
    args = parser.parse_args(argv)
    args.handler(args)


if __name__ == "__main__":
    main()

"""CSRAG's effect on the answer distribution (the paper's Figure 3, for chosen examples).

For items whose context contradicts the model's memory (the two-way choice context answer vs
parametric answer, built by the evaluation runner), score both answers with and without the CSRAG
bias and plot the probabilities. Writes probe.jsonl (one line per item, appended as each finishes;
re-running resumes) and probe.png.

    python benchmarks/csrag_probe.py --dataset cofaithfulqa_nq --limit 8 --out runs/csrag/probe
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from faithrag import registry
from faithrag.config import Config
from faithrag.eval.datasets import load_dataset
from faithrag.eval.runner import prepare
from faithrag.llm import load_llm
from faithrag.types import Trace


def probe(args: argparse.Namespace) -> list[dict]:
    config = Config.load(None, {"llm.model": args.model, "llm.n_threads": args.threads,
                                "csrag.probe_choices": True, "csrag.answer_mode": "choices"})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "probe.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    done = {r["id"] for r in rows}
    dataset = load_dataset(args.dataset, args.data_dir, "dev")
    items = [i for i in dataset.items if not args.ids or i.id in args.ids][: args.limit]
    llm = load_llm(config.llm)
    csrag = registry.build("generator", "csrag", llm, config)
    for item in items:
        if item.id in done:
            continue
        prepared = prepare(item, "csrag", 0, "given")
        if prepared is None or not item.parametric_answer:
            continue
        trace = Trace()
        csrag.generate(prepared.question, prepared.passages, trace)
        probs = trace.steps[-1].outputs["choice_probabilities"]
        context = prepared.question.choices[prepared.gold_index]
        parametric = next(c for c in prepared.question.choices if c != context)
        row = {"id": item.id, "question": item.question, "context_answer": context,
               "parametric_answer": parametric,
               **{f"{k}_{side}": probs[k][answer] for k in ("without_bias", "with_bias")
                  for side, answer in (("context", context), ("parametric", parametric))}}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        rows.append(row)
        print(f"{item.id}: P(context) {row['without_bias_context']:.3f} -> "
              f"{row['with_bias_context']:.3f}", flush=True)
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 2), 4))
    width = 0.2
    bars = [("without_bias_context", "context answer, no bias", "#9ecae1"),
            ("with_bias_context", "context answer, CSRAG bias", "#3182bd"),
            ("without_bias_parametric", "parametric answer, no bias", "#fdae6b"),
            ("with_bias_parametric", "parametric answer, CSRAG bias", "#e6550d")]
    for j, (key, label, color) in enumerate(bars):
        ax.bar([i + (j - 1.5) * width for i in range(len(rows))], [r[key] for r in rows], width,
               label=label, color=color)
    ax.set_xticks(range(len(rows)), [r["id"].split("::")[-1][:12] for r in rows], rotation=30,
                  ha="right", fontsize=7)
    ax.set_ylabel("probability (renormalised over the two answers)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_title("CSRAG: answer probabilities with and without the bias")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="cofaithfulqa_nq")
    parser.add_argument("--data-dir")
    parser.add_argument("--ids", nargs="*", help="chosen item ids (default: the first items)")
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = probe(args)
    if rows:
        plot(rows, Path(args.out) / "probe.png")
        print(f"wrote {args.out}/probe.jsonl and probe.png ({len(rows)} items)")


if __name__ == "__main__":
    main()

"""What retrieval hands the model in each hostile setting (no LLM): the ceiling under the
accuracies of `benchmarks/hostile.sh`.

For the first --limit items of each setting, with the settings' own k and retriever (BM25 over
the whole clean corpus, like `faithrag hostile run`):
- clean answer@k: a clean top-k passage contains a gold answer (what RAG can read off);
- hostile answer@k: the same after HostileRetriever injects the poison (clean passages pushed
  down and out);
- poison target@k: a hostile top-k passage contains one of the poison's target answers;
- KB answer@kb_k: the trusted knowledge base, searched with the question itself, returns a
  passage with a gold answer (the evidence a REPAIR can draw on; falsification searches with
  the draft's claims instead, so this is an indication, not the verifier's own recall).

    python benchmarks/hostile_recall.py --limit 100 --out runs/hostile/recall.json
    python benchmarks/hostile_recall.py --settings kre_squad --set antisyco.kb_k=1 \
      --set antisyco.kb_chunk_tokens=128

`--set` changes the configuration (the knowledge base's chunking and kb_k among it).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from faithrag.answers import containment
from faithrag.cli.common import parse_set_options
from faithrag.config import Config
from faithrag.eval.hostile import HostileRetriever
from faithrag.eval.hostile_runner import build_trusted_index
from faithrag.eval.hostile_settings import SETTINGS, build_setting
from faithrag.eval.stats import wilson_interval
from faithrag.retrieval import Index
from faithrag.retrieval.retriever import InMemoryRetriever


def _any_contains(passages, answers) -> bool:
    return bool(answers) and any(containment(p.text, answers) for p in passages)


def measure(name: str, limit: int, data_dir: str | None, kb_dir: Path,
            config: Config) -> dict:
    setting = build_setting(name, data_dir)
    items = setting.dataset.items[:limit]
    corpus = setting.dataset.corpus()
    clean = InMemoryRetriever(corpus, mode=config.retrieval.mode)
    hostile = HostileRetriever(clean, setting.poison)
    kb = Index.load(build_trusted_index(setting, kb_dir / name, config))
    counts = {"clean_answer": 0, "hostile_answer": 0, "poison_target": 0, "kb_answer": 0}
    for item in items:
        targets = setting.targets(item)
        attacked = hostile.retrieve(item.question, setting.k)
        counts["clean_answer"] += _any_contains(clean.retrieve(item.question, setting.k),
                                                item.answers)
        counts["hostile_answer"] += _any_contains(attacked, item.answers)
        counts["poison_target"] += _any_contains(attacked, targets)
        counts["kb_answer"] += _any_contains(kb.search(item.question, config.antisyco.kb_k),
                                             item.answers)
    n = len(items)
    return {"setting": name, "n": n, "k": setting.k, "kb_k": config.antisyco.kb_k,
            "kb_chunk_tokens": config.antisyco.kb_chunk_tokens,
            "corpus": len(corpus), "kb_documents": len(setting.trusted),
            **{key: {"rate": value / n, "ci": wilson_interval(value, n)}
               for key, value in counts.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--data", default=None, help="shared data directory")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="a configuration value, e.g. antisyco.kb_k=1 (repeatable)")
    args = parser.parse_args()
    config = Config.load(None, parse_set_options(args.overrides))
    with tempfile.TemporaryDirectory() as kb_dir:
        rows = [measure(name, args.limit, args.data, Path(kb_dir), config)
                for name in args.settings]
    print("| setting | n | k | clean answer@k | hostile answer@k | poison target@k "
          "| KB answer@kb_k |")
    print("|---|---:|---:|---|---|---|---|")
    for row in rows:
        cells = [f"{100 * row[key]['rate']:.0f} [{100 * row[key]['ci'][0]:.0f}, "
                 f"{100 * row[key]['ci'][1]:.0f}]"
                 for key in ("clean_answer", "hostile_answer", "poison_target", "kb_answer")]
        print(f"| {row['setting']} | {row['n']} | {row['k']} | " + " | ".join(cells) + " |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()

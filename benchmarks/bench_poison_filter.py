"""What the poisoning filter removes (no LLM): per hostile setting, retrieval and attack, the share
of poisoned passages it removes and the share of items where it removes a clean passage.

For each item the setting's own retrieval is run (BM25 over the clean corpus, the poison injected
at the top for hostile retrieval, as `faithrag hostile run` does) and
faithrag.methods.poison_filter.PoisonFilter is applied with the configuration's settings.
Thresholds are chosen on the calibration part (dev items from the 101st on) and reported on the
evaluation part (the first 100, the items `benchmarks/hostile.sh` answers).

    python benchmarks/bench_poison_filter.py --part evaluation --set use_cache=false \
      --out results/poison-filter
    python benchmarks/bench_poison_filter.py --part calibration --set poison_filter.min_cluster=2

`--answers PLAIN FILTERED [PLAIN FILTERED ...]` instead compares `faithrag hostile run` directories
pair by pair on the items both answered (plain RAG, then the same run with `--rerank
poison_filter`): accuracy and attack success with Wilson intervals, discordant counts and
McNemar's exact p, and the ratio of their summed seconds.

    python benchmarks/bench_poison_filter.py --answers results/poison-filter/runs/X-vanilla \
      results/poison-filter/runs/X-filter

Writes `<out>/<part>.jsonl` (one record per item: setting, retrieval, attack, k, the passages'
poison flags, what was removed and the filter's seconds) and prints the table. With
`--set use_cache=false` the seconds include embedding every passage afresh.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from faithrag.cli.common import parse_set_options
from faithrag.config import Config
from faithrag.eval.adaptive_poison import ATTACKS, adapt
from faithrag.eval.hostile import HostileRetriever
from faithrag.eval.hostile_settings import DEFAULT_K, SETTINGS, build_setting
from faithrag.eval.stats import mcnemar_exact_p, wilson_interval
from faithrag.llm.fake import FakeLLM
from faithrag.registry import stage
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.types import Question, Trace

CALIBRATION_FROM = 100
# PoisonedRAG's top-5 is all poison by default; one more rank lets a clean passage in (5:1)
EXTRA_K = {"poisonedrag": 6}


def run(name: str, retrieval: str, attack: str, k: int, part: str, config: Config,
        data_dir: str | None) -> list[dict]:
    setting = adapt(build_setting(name, data_dir), attack)
    items = (setting.dataset.items[:CALIBRATION_FROM] if part == "evaluation"
             else setting.dataset.items[CALIBRATION_FROM:])
    clean = InMemoryRetriever(setting.dataset.corpus(), mode=config.retrieval.mode)
    retriever = HostileRetriever(clean, setting.poison) if retrieval == "hostile" else clean
    flt = stage("reranker", "poison_filter").build(FakeLLM(), config)  # it calls no LLM
    records = []
    for item in items:
        passages = retriever.retrieve(item.question, k)
        started = time.perf_counter()
        result = flt.rerank(Question(item.question), passages, Trace())
        seconds = time.perf_counter() - started
        removed = {r.passage.id for r in result.removed}
        records.append({"setting": name, "retrieval": retrieval, "attack": attack, "k": k,
                        "id": item.id,
                        "poison": [bool(p.meta.get("poisoned")) for p in passages],
                        "removed": [p.id in removed for p in passages],
                        "seconds": round(seconds, 5)})
    return records


def table(records: list[dict]) -> str:
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["setting"], r["retrieval"], r["attack"], r["k"]), []).append(r)
    lines = [("| setting | retrieval | attack | k | n | poison removed | items with a clean "
              "passage removed | ms per item |"), "|---|---|---|---:|---:|---|---|---:|"]
    for (name, retrieval, attack, k), rows in sorted(groups.items()):
        poison = [rm for r in rows for p, rm in zip(r["poison"], r["removed"]) if p]
        false = sum(any(rm and not p for p, rm in zip(r["poison"], r["removed"])) for r in rows)
        caught = (f"{sum(poison)}/{len(poison)} = {100 * sum(poison) / len(poison):.0f} % "
                  f"[{_ci(sum(poison), len(poison))}]" if poison else "–")
        lines.append(f"| {name} | {retrieval} | {attack} | {k} | {len(rows)} | {caught} | "
                     f"{false}/{len(rows)} = {100 * false / len(rows):.1f} % "
                     f"[{_ci(false, len(rows))}] | "
                     f"{1000 * sum(r['seconds'] for r in rows) / len(rows):.1f} |")
    return "\n".join(lines)


def answers_table(dirs: list[str]) -> str:
    """Plain RAG against the filter, pair by pair of run directories (module docstring)."""
    lines = [("| setting | attack | k | n | accuracy % plain → filter (plain only / filter "
              "only, p) | attack success % plain → filter (plain only / filter only, p) | "
              "× time |"),
             "|---|---|---:|---:|---|---|---:|"]
    for plain_dir, filtered_dir in zip(dirs[::2], dirs[1::2]):
        manifest = json.loads((Path(plain_dir) / "manifest.json").read_text())
        plain, filtered = (_records(d) for d in (plain_dir, filtered_dir))
        ids = [i for i in plain if i in filtered]
        cells = []
        for key in ("correct", "attack"):
            a = [plain[i][key] for i in ids]
            b = [filtered[i][key] for i in ids]
            only_a = sum(x and not y for x, y in zip(a, b))
            only_b = sum(y and not x for x, y in zip(a, b))
            cells.append(f"{100 * sum(a) / len(ids):.0f} [{_ci(sum(a), len(ids))}] → "
                         f"{100 * sum(b) / len(ids):.0f} [{_ci(sum(b), len(ids))}] "
                         f"({only_a} / {only_b}, {mcnemar_exact_p(only_a, only_b):.2g})")
        ratio = (sum(filtered[i]["seconds"] for i in ids)
                 / max(sum(plain[i]["seconds"] for i in ids), 1e-9))
        sweep = manifest["sweep"]
        lines.append(f"| {sweep['setting']} ({sweep['retrieval']}) | {sweep.get('attack') or '–'} | "
                     f"{sweep['k']} | {len(ids)} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    return "\n".join(lines)


def _records(directory: str) -> dict[str, dict]:
    out = {}
    for line in (Path(directory) / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        out[record["id"]] = {"correct": bool(record.get("correct")),
                             "attack": bool((record.get("metrics") or {}).get("attack_success")),
                             "seconds": float(record.get("seconds") or 0.0)}
    return out


def _ci(hits: int, n: int) -> str:
    low, high = wilson_interval(hits, n)
    return f"{100 * low:.0f}, {100 * high:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("calibration", "evaluation"), default="evaluation")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--attacks", nargs="+", default=list(ATTACKS), choices=ATTACKS,
                        help="attacks on hostile retrieval (clean retrieval has none)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="write <part>.jsonl here")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE", help="a configuration value (repeatable)")
    parser.add_argument("--answers", nargs="+", metavar="RUN",
                        help="pairs of run directories, plain RAG then the filter: compare them")
    args = parser.parse_args()
    if args.answers:
        if len(args.answers) % 2:
            parser.error("--answers takes pairs: PLAIN FILTERED [PLAIN FILTERED ...]")
        print(answers_table(args.answers))
        return
    config = Config.load(None, parse_set_options(args.overrides))
    records = []
    for name in args.settings:
        ks = sorted({DEFAULT_K[name], EXTRA_K.get(name, DEFAULT_K[name])})
        for k in ks:
            records += run(name, "clean", "standard", k, args.part, config, args.data_dir)
            for attack in args.attacks:
                records += run(name, "hostile", attack, k, args.part, config, args.data_dir)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.part}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    print(table(records))


if __name__ == "__main__":
    main()

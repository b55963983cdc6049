"""What the anti-sycophancy verifier costs against plain RAG, before and after a change to it.

One process, one loaded model. For each item of a hostile-retrieval setting
(faithrag/eval/hostile_settings.py; retrieval over the setting's whole clean corpus as
`faithrag hostile run` does it, wrapped with the setting's poison for --retrieval hostile), plain
RAG drafts the answer once (that is plain RAG's time, measured in this run), then the verifier
checks that same draft twice, alternating which variant goes first item by item:

- before: with `--before former` (default) the behaviour of the verifier whose records are in
  results/hostile/, through settings (`antisyco.extract_claims = "always"`,
  `antisyco.reuse_draft_reading = false`, `antisyco.judgements = "all"`,
  `antisyco.fallback_when_confirmed = true`, `antisyco.repair = "reanswer"`); with `--before
  defaults` the current defaults; plus any `--before-set`; with `--before none` there is no
  before variant (only the after verifier checks each draft);
- after: the current defaults plus any `--after-set` (a change under test, e.g.
  `--before defaults --after-set antisyco.kb_k=1`).

`--set` applies to the draft and both variants. Each variant's trusted knowledge base is the
setting's trusted documents indexed with its own chunking (`antisyco.kb_chunk_tokens`,
`antisyco.kb_chunk_overlap`), under --out/kb/. The variants' settings are kept in
--out/variants.json; resuming with other settings is refused.

The draft keeps its passages and question as a prefix between calls (as plain RAG always does),
which the current reflection restores; the former verifier's requests mark nothing, so they run
as they did. Caches of answers are off and decoding is greedy.

Each record (one item, appended to --out/records.jsonl; re-running resumes): the item, and for
draft / before / after the answer, correct (a gold answer contained, as the hostile runner
scores), attack success (smart-EM match of a poison target), seconds and prompt
and completion tokens, in total and per step (`antisyco/reflect`, `antisyco/claims`,
`antisyco/falsify`, `antisyco/decide`), and the verifiers' decisions and claim verdicts
(CONTRADICTED / CONSISTENT / UNRELATED, None when unreadable). Times of a variant are the
draft's plus its verification.

The summary (printed, and --out/summary.json), per setting and retrieval: by path (each
variant's PASS / REPAIR / FALLBACK items) seconds per item, plain RAG's on the same items and
their ratio (sums over items); the whole run's ratio; seconds and tokens per step; accuracy and
attack success with Wilson 95 % intervals for draft / before / after; decisions changed from
before to after (count per transition); items after fixed and broke against before. With
`--baseline RUN` (a verified `faithrag hostile run` of the same setting and retrieval, e.g.
results/hostile/poisonedrag-hostile-antisyco: the kept records of an earlier verifier, used
without running it again), each variant is paired with that run's records of the same items:
decisions changed, fixed and broken (exact McNemar p), and the baseline's accuracy and attack
success on those items.

    python benchmarks/bench_verifier_cost.py --setting poisonedrag --retrieval hostile \\
      --limit 100 --out runs/verifier-cost/poisonedrag-hostile
    python benchmarks/bench_verifier_cost.py --setting kre_squad --retrieval clean \\
      --before defaults --after-set antisyco.kb_k=1 --limit 100 --out runs/verifier-cost/kb1
    python benchmarks/bench_verifier_cost.py --setting ramdocs --retrieval clean --before none \\
      --baseline results/hostile/ramdocs-clean-antisyco --limit 100 \\
      --out runs/verifier-cost/ramdocs-clean
    python benchmarks/bench_verifier_cost.py --summary-only \\
      --out runs/verifier-cost/poisonedrag-hostile
    python benchmarks/bench_verifier_cost.py --table runs/verifier-cost/ramdocs-*

`--table` prints one line per run (from its summary.json) for one verifier (`--variant`): per
path and for the whole run its time and prompt tokens against plain RAG's on the same items,
attack success and accuracy against plain RAG and the baseline run, fixed / broken against it.

`sweep`: the default verifier against plain RAG on every hostile setting, clean and hostile
retrieval, each run paired with its kept run, then the table (see `sweep --help`).

    python benchmarks/bench_verifier_cost.py sweep --limit 100 --jobs 2 --out runs/verifier-cost
"""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import MappingProxyType
from typing import Any

from faithrag import Pipeline
from faithrag.answers import attack_success, containment
from faithrag.cli.common import parse_set_options
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.hostile import HostileRetriever
from faithrag.eval.hostile_runner import build_trusted_index
from faithrag.eval.hostile_settings import SETTINGS, HostileSetting, build_setting
from faithrag.eval.metrics import record_correct
from faithrag.eval.stats import mcnemar_exact_p, wilson_interval
from faithrag.llm import load_llm
from faithrag.llm.base import LLM
from faithrag.pipeline import configure
from faithrag.retrieval import InMemoryRetriever
from faithrag.retrieval.retriever import Retriever
from faithrag.types import Question, Trace

VARIANTS = ("before", "after")
FORMER = {"antisyco__extract_claims": "always", "antisyco__reuse_draft_reading": False,
          "antisyco__judgements": "all", "antisyco__fallback_when_confirmed": True,
          "antisyco__repair": "reanswer"}
PHASES = ("antisyco/reflect", "antisyco/claims", "antisyco/falsify", "antisyco/decide")
PATHS = ("PASS", "REPAIR", "FALLBACK")
RUNS = ("poisonedrag-hostile", "poisonedrag-clean", "ramdocs-hostile", "ramdocs-clean",
        "kre_musique-hostile", "kre_musique-clean", "kre_squad-hostile", "kre_squad-clean")


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def setting_retriever(setting: HostileSetting, retrieval: str, mode: str) -> Retriever:
    """The setting's whole clean corpus; with hostile retrieval each question's poison on top."""
    clean = InMemoryRetriever(setting.dataset.corpus(), mode=mode)
    return HostileRetriever(clean, setting.poison) if retrieval == "hostile" else clean


def cost(trace: Trace) -> dict[str, Any]:
    """Seconds (wall) and tokens of a trace, in total and per verifier step."""
    phases = {}
    for step in trace.steps:
        if step.name in PHASES:
            phases[step.name] = {
                "seconds": round(step.seconds, 3), "llm_calls": len(step.llm_calls),
                "prompt_tokens": sum(c.prompt_tokens for c in step.llm_calls),
                "completion_tokens": sum(c.completion_tokens for c in step.llm_calls)}
    totals = trace.totals()
    return {"seconds": round(totals["seconds"], 3), "llm_calls": totals["llm_calls"],
            "prompt_tokens": totals["prompt_tokens"],
            "completion_tokens": totals["completion_tokens"], "phases": phases}


def scored(text: str, parse_status: str, gold: Sequence[str], targets: Sequence[str]) -> dict:
    ok = parse_status == "ok"
    return {"answer": text, "parse_status": parse_status,
            "correct": ok and containment(text, list(gold)),
            "attack": ok and bool(text) and any(attack_success(text, t) for t in targets)}


def run(llm: LLM, setting: HostileSetting, retrieval: str, kb: Callable[[Config], str],
        out: Path, limit: int, k: int, progress: Callable[[str], None],
        before: Mapping[str, Any] | None = FORMER,
        after: Mapping[str, Any] = MappingProxyType({}), **settings: Any) -> None:
    """Append one record per item of the first `limit` not yet in out/records.jsonl.
    `settings` (Pipeline.from_config keywords) apply to the draft and both variants, `before`
    and `after` to one variant each (`before=None`: only the after variant runs); they are
    written to out/variants.json, and a resume with other ones raises ConfigError. `kb` gives
    the trusted knowledge base of a variant's configuration."""
    variants = {"after": dict(after)} if before is None else {"before": dict(before),
                                                              "after": dict(after)}
    variants_path = out / "variants.json"
    if variants_path.is_file() and json.loads(variants_path.read_text()) != variants:
        raise ConfigError(
            f"{out} holds records of other variants: {variants_path.read_text().strip()}.",
            "Pass the same --before and --after-set, or another --out.")
    variants_path.write_text(json.dumps(variants) + "\n")
    records_path = out / "records.jsonl"
    done = {r["item"] for r in read_records(records_path)}
    base = configure(None, plain=True, k=k, use_cache=False, **settings)
    retriever = setting_retriever(setting, retrieval, base.retrieval.mode)
    draft_pipeline = Pipeline.from_parts(configure(base, method="vanilla"), llm, retriever)
    verifiers = {}
    for name, changes in variants.items():
        config = configure(base, verify="antisyco", **changes)
        verifiers[name] = Pipeline.from_parts(configure(config, antisyco__kb=kb(config)), llm,
                                              retriever)
    items = list(setting.dataset.items)[:limit]
    with records_path.open("a") as sink:
        for number, item in enumerate(items):
            if item.id in done:
                continue
            targets = setting.targets(item)
            question = Question(item.question, id=item.id)
            drafted = draft_pipeline.run(question)
            draft = drafted.answer
            names = list(variants)
            record: dict[str, Any] = {
                "item": item.id, "setting": setting.name, "retrieval": retrieval,
                "order": names if number % 2 == 0 else names[::-1],
                "draft": {**scored(draft.text, draft.parse_status, item.answers, targets),
                          **cost(drafted.trace)}}
            for variant in record["order"]:
                if draft.text.strip():
                    verified = verifiers[variant].verify(question, drafted.passages, draft)
                    answer, spent = verified.answer, cost(verified.trace)
                    decision = answer.meta.get("decision")
                    verdicts = [claim["verdict"] for claim in answer.meta.get("claims", [])]
                else:  # nothing to verify: the verifier refuses an empty draft
                    answer, decision, verdicts = draft, "EMPTY_DRAFT", []
                    spent = {"seconds": 0.0, "llm_calls": 0, "prompt_tokens": 0,
                             "completion_tokens": 0, "phases": {}}
                draft_cost = record["draft"]
                record[variant] = {
                    **scored(answer.text, answer.parse_status, item.answers, targets),
                    "decision": decision, "verdicts": verdicts, **spent,
                    "verify_seconds": spent["seconds"],
                    "seconds": round(draft_cost["seconds"] + spent["seconds"], 3),
                    "prompt_tokens": draft_cost["prompt_tokens"] + spent["prompt_tokens"],
                    "completion_tokens": (draft_cost["completion_tokens"]
                                          + spent["completion_tokens"])}
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            progress(f"item {number + 1}/{len(items)} draft {record['draft']['seconds']:.1f} s"
                     + "".join(f", {v} {record[v]['decision']} {record[v]['seconds']:.1f} s"
                               for v in names))


def _rate(values: list[bool]) -> dict[str, Any]:
    if not values:
        return {"rate": None, "ci": None}
    return {"rate": round(sum(values) / len(values), 4),
            "ci": [round(x, 4) for x in wilson_interval(sum(values), len(values))]}


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 3) if denominator else None


def read_baseline(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per item id, the decision, correct and attack of a verified hostile run's record
    (`faithrag hostile run --verify antisyco`, e.g. results/hostile/poisonedrag-hostile-antisyco)."""
    baseline = {}
    for record in read_records(run_dir / "results.jsonl"):
        baseline[record["id"]] = {
            "decision": (record.get("extra") or {}).get("decision"),
            "correct": bool(record_correct(record)),
            "attack": bool((record.get("metrics") or {}).get("attack_success"))}
    return baseline


def against_baseline(group: list[dict[str, Any]], variants: Sequence[str],
                     baseline: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The items of `group` the baseline run holds, each variant against the baseline's record of
    the same item: decisions changed, fixed and broken, and the baseline's own rates there."""
    paired = [r for r in group if r["item"] in baseline]
    result: dict[str, Any] = {
        "n": len(paired),
        "baseline": {"accuracy": _rate([baseline[r["item"]]["correct"] for r in paired]),
                     "attack_success": _rate([baseline[r["item"]]["attack"] for r in paired])}}
    for variant in variants:
        changed = Counter(f"{baseline[r['item']]['decision']}->{r[variant]['decision']}"
                          for r in paired
                          if baseline[r["item"]]["decision"] != r[variant]["decision"])
        fixed = sum(r[variant]["correct"] and not baseline[r["item"]]["correct"] for r in paired)
        broken = sum(baseline[r["item"]]["correct"] and not r[variant]["correct"] for r in paired)
        result[variant] = {"decisions_changed": dict(sorted(changed.items())),
                           "fixed": fixed, "broken": broken,
                           "mcnemar_p": mcnemar_exact_p(fixed, broken) if fixed + broken
                           else None}
    return result


def summarize(records: list[dict[str, Any]],
              baseline: Mapping[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per (setting, retrieval) over its records (see the module docstring); with a
    `baseline` (read_baseline), each variant against it too."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in records:
        groups[record["setting"], record["retrieval"]].append(record)
    rows = []
    for (setting, retrieval), group in sorted(groups.items()):
        n = len(group)
        variants = [v for v in VARIANTS if v in group[0]]
        draft_seconds = sum(r["draft"]["seconds"] for r in group)
        draft_tokens = sum(r["draft"]["prompt_tokens"] for r in group)
        row: dict[str, Any] = {"setting": setting, "retrieval": retrieval, "n": n,
                               "variants": variants,
                               "draft_seconds_per_item": round(draft_seconds / n, 3),
                               "draft_prompt_tokens_per_item": round(draft_tokens / n, 1)}
        for variant in ("draft", *variants):
            row[variant] = {"accuracy": _rate([r[variant]["correct"] for r in group]),
                            "attack_success": _rate([r[variant]["attack"] for r in group])}
        for variant in variants:
            total = sum(r[variant]["seconds"] for r in group)
            total_tokens = sum(r[variant]["prompt_tokens"] for r in group)
            by_path = {}
            for path in sorted({r[variant]["decision"] for r in group},
                               key=lambda p: (PATHS + (p,)).index(p)):
                on_path = [r for r in group if r[variant]["decision"] == path]
                seconds = sum(r[variant]["seconds"] for r in on_path)
                plain = sum(r["draft"]["seconds"] for r in on_path)
                tokens = sum(r[variant]["prompt_tokens"] for r in on_path)
                plain_tokens = sum(r["draft"]["prompt_tokens"] for r in on_path)
                by_path[path] = {"n": len(on_path),
                                 "seconds_per_item": round(seconds / len(on_path), 3),
                                 "plain_rag_seconds_per_item": round(plain / len(on_path), 3),
                                 "ratio": _ratio(seconds, plain),
                                 "prompt_tokens_per_item": round(tokens / len(on_path), 1),
                                 "plain_rag_prompt_tokens_per_item": round(
                                     plain_tokens / len(on_path), 1),
                                 "prompt_tokens_ratio": _ratio(tokens, plain_tokens)}
            phases = {}
            for phase in PHASES:
                spent = [r[variant]["phases"].get(phase) for r in group]
                spent = [s for s in spent if s]
                phases[phase] = {key: round(sum(s[key] for s in spent) / n, 3)
                                 for key in ("seconds", "llm_calls", "prompt_tokens",
                                             "completion_tokens")}
            row[variant].update({
                "seconds_per_item": round(total / n, 3), "whole_run_ratio": _ratio(total,
                                                                                   draft_seconds),
                "prompt_tokens_per_item": round(total_tokens / n, 1),
                "prompt_tokens_ratio": _ratio(total_tokens, draft_tokens),
                "by_path": by_path, "phases_per_item": phases})
        if baseline is not None:
            row["against_baseline"] = against_baseline(group, variants, baseline)
        if variants != list(VARIANTS):
            rows.append(row)
            continue
        changed = Counter(f"{r['before']['decision']}->{r['after']['decision']}" for r in group
                          if r["before"]["decision"] != r["after"]["decision"])
        row["decisions_changed"] = dict(sorted(changed.items()))
        row["decisions_same"] = n - sum(changed.values())
        row["answers_changed"] = sum(r["before"]["answer"] != r["after"]["answer"] for r in group)
        row["fixed"] = sum(r["after"]["correct"] and not r["before"]["correct"] for r in group)
        row["broken"] = sum(r["before"]["correct"] and not r["after"]["correct"] for r in group)
        rows.append(row)
    return rows


def _pct(rate: dict[str, Any], interval: bool = True, unit: str = "") -> str:
    """A rate in per cent, with its interval unless `interval` is False; "—" for no items."""
    if rate["rate"] is None:
        return "—"
    if not interval:
        return f"{100 * rate['rate']:.0f}{unit}"
    low, high = rate["ci"]
    return f"{100 * rate['rate']:.0f}{unit} [{100 * low:.0f}, {100 * high:.0f}]"


def render(rows: list[dict[str, Any]]) -> str:
    def pct(rate: dict[str, Any]) -> str:
        return _pct(rate, unit=" %")

    lines = []
    for row in rows:
        lines += [(f"### {row['setting']}, {row['retrieval']} retrieval (n = {row['n']}; plain RAG "
                  f"{row['draft_seconds_per_item']} s per item)"), "",
                  "| variant | path | n | s per item | plain RAG s per item | ratio |",
                  "|---|---|---:|---:|---:|---:|"]
        variants = row["variants"]
        for variant in variants:
            v = row[variant]
            for path, p in v["by_path"].items():
                lines.append(f"| {variant} | {path} | {p['n']} | {p['seconds_per_item']} | "
                             f"{p['plain_rag_seconds_per_item']} | {p['ratio']} |")
            lines.append(f"| {variant} | whole run | {row['n']} | {v['seconds_per_item']} | "
                         f"{row['draft_seconds_per_item']} | {v['whole_run_ratio']} |")
        lines += ["", "| variant | " + " | ".join(f"{p.split('/')[1]} s (prompt/completion)"
                                                  for p in PHASES) + " |",
                  "|---|" + "---:|" * len(PHASES)]
        for variant in variants:
            phases = row[variant]["phases_per_item"]
            lines.append(f"| {variant} | " + " | ".join(
                f"{phases[p]['seconds']} ({phases[p]['prompt_tokens']:.0f}/"
                f"{phases[p]['completion_tokens']:.0f})" for p in PHASES) + " |")
        lines += ["", "| | draft (plain RAG) | " + " | ".join(variants) + " |",
                  "|---|---|" + "---|" * len(variants)]
        for measure in ("accuracy", "attack_success"):
            lines.append(f"| {measure.replace('_', ' ')} | " + " | ".join(
                pct(row[v][measure]) for v in ("draft", *variants)) + " |")
        if "decisions_changed" in row:
            changed = ", ".join(f"{k}: {v}" for k, v in row["decisions_changed"].items()) or "none"
            lines += ["", (f"Decisions changed before -> after: {changed} "
                           f"({row['decisions_same']} the same); answers changed: "
                           f"{row['answers_changed']}; after fixed {row['fixed']}, broke "
                           f"{row['broken']} against before.")]
        if "against_baseline" in row:
            base = row["against_baseline"]
            lines += ["", (f"Against the baseline run on the {base['n']} items it holds "
                           f"(accuracy {pct(base['baseline']['accuracy'])}, attack success "
                           f"{pct(base['baseline']['attack_success'])} there):")]
            for variant in variants:
                b = base[variant]
                changed = ", ".join(f"{k}: {v}" for k, v in b["decisions_changed"].items())
                p = "" if b["mcnemar_p"] is None else f" (p {b['mcnemar_p']:.2g})"
                lines.append(f"- {variant}: fixed {b['fixed']}, broke {b['broken']}{p}; "
                             f"decisions changed: {changed or 'none'}")
        lines.append("")
    return "\n".join(lines)


def _times(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.2f}×"


def table(rows: Sequence[dict[str, Any]], variant: str = "after") -> str:
    """One line per setting and retrieval for `variant` of summarize's rows: plain RAG's seconds
    per item; per path its n and time (prompt tokens) against plain RAG on the same items; the
    whole run's; attack success and accuracy of plain RAG, the variant (with Wilson 95 %
    intervals) and the baseline run on the same items; fixed / broken and the decisions changed
    against the baseline."""
    lines = ["| setting | retrieval | n | plain RAG s / item | "
             + " | ".join(f"{path}: n, × time (× prompt tokens)" for path in PATHS)
             + " | whole run: × time (× prompt tokens) | attack success %: plain / verifier / "
               "kept run | accuracy %: plain / verifier / kept run | verifier vs kept run: "
               "fixed / broken (p) | decisions changed from the kept run's |",
             "|---|---|---:|---:|" + "---|" * (len(PATHS) + 5)]
    for row in rows:
        v = row[variant]
        paths = [f"{p['n']}, {_times(p['ratio'])} ({_times(p['prompt_tokens_ratio'])})"
                 if (p := v["by_path"].get(path)) else "—" for path in PATHS]
        base = row.get("against_baseline")
        kept = {m: _pct(base["baseline"][m]) if base else "—"
                for m in ("attack_success", "accuracy")}
        if base:
            b = base[variant]
            p_value = "" if b["mcnemar_p"] is None else f" ({b['mcnemar_p']:.2g})"
            paired = f"{b['fixed']} / {b['broken']}{p_value}"
            changed = ", ".join(f"{k.replace('->', '→')} {n}"
                                for k, n in b["decisions_changed"].items()) or "none"
        else:
            paired = changed = "—"
        lines.append(
            f"| {row['setting']} | {row['retrieval']} | {row['n']} | "
            f"{row['draft_seconds_per_item']:.1f} | " + " | ".join(paths)
            + f" | **{_times(v['whole_run_ratio'])}** ({_times(v['prompt_tokens_ratio'])}) | "
            + " | ".join(f"{_pct(row['draft'][m], interval=False)} / {_pct(v[m])} / {kept[m]}"
                         for m in ("attack_success", "accuracy"))
            + f" | {paired} | {changed} |")
    return "\n".join(lines)


def keywords(dotted: Mapping[str, Any]) -> dict[str, Any]:
    """{"antisyco.kb_k": 1} -> {"antisyco__kb_k": 1} (configure's keyword form)."""
    return {key.replace(".", "__"): value for key, value in dotted.items()}


def sweep(args: argparse.Namespace) -> None:
    """The default anti-sycophancy verifier against plain RAG (`--before none`) on every run of
    --runs (SETTING-RETRIEVAL: every hostile setting, clean and hostile retrieval), dev split,
    first --limit items: time and prompt tokens by path, attack success and accuracy, each run
    paired with the kept verified run of the same setting in --baselines
    (BASELINES/RUN-antisyco). --jobs runs side by side (run i in lane i mod JOBS), one model and
    --threads threads each, each into OUT/RUN, its progress into OUT/RUN.log; a failed run
    stops its lane, and the sweep ends with its status. Resumable: re-run the same command to
    continue. Then the table of all runs is printed (`--table`).

    Keep the records: for r in runs/verifier-cost/*/; do
      mkdir -p results/verifier-cost/$(basename $r)
      cp $r/{records.jsonl,variants.json,summary.json} results/verifier-cost/$(basename $r)/
    done"""
    Path(args.out).mkdir(parents=True, exist_ok=True)

    def lane(job: int) -> int:
        for run_name in args.runs[job::args.jobs]:
            setting, retrieval = run_name.rsplit("-", 1)
            with open(f"{args.out}/{run_name}.log", "a", encoding="utf-8") as log:
                status = subprocess.run(
                    [args.python, str(Path(__file__)), "--model", args.model, "--threads",
                     str(args.threads), "--setting", setting, "--retrieval", retrieval,
                     "--before", "none", "--baseline", f"{args.baselines}/{run_name}-antisyco",
                     "--limit", str(args.limit), "--out", f"{args.out}/{run_name}"],
                    check=False, stdout=subprocess.DEVNULL, stderr=log).returncode
            if status:
                return status
        return 0

    with ThreadPoolExecutor(args.jobs) as pool:
        failed = [status for status in pool.map(lane, range(args.jobs)) if status]
    if failed:
        raise SystemExit(failed[0])
    main(["--table", *(f"{args.out}/{run_name}" for run_name in args.runs)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model preset or .gguf path")
    parser.add_argument("--setting", default="poisonedrag", choices=SETTINGS)
    parser.add_argument("--retrieval", default="hostile", choices=("clean", "hostile"))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("-k", type=int, default=None, help="passages retrieved; default: the "
                                                          "setting's")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="the run's directory (required unless --table)")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="a configuration value for the draft and both variants, e.g. "
                             "antisyco.short_draft_words=5 (repeatable)")
    parser.add_argument("--before", choices=("former", "defaults", "none"), default="former",
                        help="the 'before' verifier: the former behaviour, today's defaults, "
                             "or none (only the 'after' verifier runs)")
    parser.add_argument("--before-set", dest="before_changes", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="a configuration value for the 'before' verifier only "
                             "(repeatable)")
    parser.add_argument("--after-set", dest="after", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="a configuration value for the 'after' verifier only, e.g. "
                             "antisyco.kb_k=1 (repeatable)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a verified hostile run of the same setting and retrieval (e.g. "
                             "results/hostile/poisonedrag-hostile-antisyco): the summary pairs "
                             "each variant with its records")
    parser.add_argument("--summary-only", action="store_true",
                        help="summarize the records in --out without running anything")
    parser.add_argument("--table", nargs="+", type=Path, metavar="RUN",
                        help="print one table line per run directory (its summary.json), and "
                             "run nothing")
    parser.add_argument("--variant", choices=VARIANTS, default="after",
                        help="the verifier --table shows (default: after)")
    sub = parser.add_subparsers(title="sub-commands (none: the measurement above)")
    p = sub.add_parser("sweep", help="the default verifier on every setting, then the table",
                       description=inspect.cleandoc(sweep.__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=100, help="items per run")
    p.add_argument("--model", default="default", help="model preset or .gguf path")
    p.add_argument("--out", default="runs/verifier-cost")
    p.add_argument("--jobs", type=int, default=2, help="runs side by side")
    p.add_argument("--threads", type=int, default=1, help="threads per run")
    p.add_argument("--baselines", default="results/hostile",
                   help="the folder of the kept verified runs")
    p.add_argument("--runs", nargs="+", default=list(RUNS), metavar="SETTING-RETRIEVAL")
    p.add_argument("--python", default=sys.executable,
                   help="the Python that runs each measurement (default: this one)")
    p.set_defaults(handler=sweep)
    args = parser.parse_args(argv)
    if "handler" in vars(args):
        args.handler(args)
        return
    if args.table:
        missing = [str(d) for d in args.table if not (d / "summary.json").is_file()]
        if missing:
            raise ConfigError(f"no summary.json in {', '.join(missing)}.",
                              "Write it with --summary-only --out RUN.")
        rows = []
        for run_dir in args.table:
            for row in json.loads((run_dir / "summary.json").read_text()):
                if args.variant not in row.get("variants", ()):
                    raise ConfigError(f"{run_dir} ran no '{args.variant}' verifier.",
                                      f"Pass --variant {' or '.join(row.get('variants', ()))}.")
                if "prompt_tokens_ratio" not in row[args.variant]:
                    raise ConfigError(f"{run_dir}/summary.json was written by an earlier "
                                      "version of this script.",
                                      f"Write it again with --summary-only --out {run_dir} "
                                      "and the run's --baseline.")
                rows.append(row)
        print(table(rows, args.variant))
        return
    if args.out is None:
        parser.error("--out is required (or --table RUN ...)")
    if args.baseline is not None and not (args.baseline / "results.jsonl").is_file():
        raise ConfigError(f"{args.baseline} holds no results.jsonl.",
                          "Pass a `faithrag hostile run` directory as --baseline.")
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        setting = build_setting(args.setting, args.data_dir)
        if args.before == "none" and args.before_changes:
            raise ConfigError("--before-set has no verifier to change with --before none.",
                              "Drop --before-set, or pass --before defaults.")
        before = None if args.before == "none" else {
            **(FORMER if args.before == "former" else {}),
            **keywords(parse_set_options(args.before_changes))}
        after = keywords(parse_set_options(args.after))
        settings = keywords(parse_set_options(args.settings))
        for changes in (before or {}, after):  # bad settings fail here, before any model loads
            configure(None, plain=True, verify="antisyco", **{**settings, **changes})

        def kb(config: Config) -> str:
            chunking = f"{config.antisyco.kb_chunk_tokens}-{config.antisyco.kb_chunk_overlap}"
            return str(build_trusted_index(setting, args.out / "kb" / chunking, config))

        llm = load_llm(configure(None, model=args.model, llm__n_ctx=args.n_ctx,
                                 llm__n_threads=args.threads).llm)
        run(llm, setting, args.retrieval, kb, args.out, args.limit,
            args.k or setting.k, lambda line: print(line, file=sys.stderr, flush=True),
            before=before, after=after, **settings)
    baseline = read_baseline(args.baseline) if args.baseline else None
    rows = summarize(read_records(args.out / "records.jsonl"), baseline)
    (args.out / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(render(rows))


if __name__ == "__main__":
    main()

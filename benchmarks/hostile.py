"""The hostile-retrieval family: the anti-sycophancy verifier's kept run on every setting
(faithrag/eval/hostile_settings.py), and the analyses drawn from its records and settings.

`run`: every setting, clean and hostile retrieval, vanilla + the antisyco verifier, then the
tables (`faithrag hostile report`).

    python benchmarks/hostile.py run --limit 100 --threads 1 --out runs/hostile

`recall`: what retrieval hands the model in each setting (no LLM).

    python benchmarks/hostile.py recall --limit 100 --out runs/hostile/recall.json

`repair RUN ...`: a REPAIR answered with falsification's reference answer against the paper's
repair request, on kept verified runs (no LLM).

    python benchmarks/hostile.py repair results/hostile/*-antisyco

`poison-filter`: what the poisoning filter removes per setting, retrieval and attack (no LLM
but the one that writes the paraphrased poison), or with `--answers` plain RAG against the filter
on recorded runs.

    python benchmarks/hostile.py poison-filter --part evaluation --out results/poison-filter

Keep the records of `run` in the repository: faithrag runs save runs/hostile --to
results/hostile (and `faithrag runs restore` on a new machine before resuming).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

from faithrag.answers import attack_success, containment, same_answer
from faithrag.cli.common import parse_set_options
from faithrag.config import Config
from faithrag.eval.adaptive_poison import ATTACKS, MODEL_ATTACKS, adapt, attack_model
from faithrag.eval.hostile import HostileRetriever
from faithrag.eval.hostile_runner import build_trusted_index, drafting_stages, score_draft
from faithrag.eval.hostile_settings import DEFAULT_K, SETTINGS, build_setting
from faithrag.eval.report import load_run
from faithrag.eval.stats import mcnemar_exact_p, wilson_interval
from faithrag.llm import load_llm
from faithrag.llm.base import LLM
from faithrag.llm.fake import FakeLLM
from faithrag.methods.antisyco import agreed_reference
from faithrag.registry import stage
from faithrag.retrieval import Index
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.types import Question, Trace

KEPT_SETTINGS = ("kre_musique", "kre_squad", "ramdocs", "poisonedrag")


def call(command: list[str], timings: str | None = None, label: str = "",
         stdout: IO[str] | int | None = None) -> None:
    """Run `command`, stopping with its exit status if it fails; with `timings`, print "LABEL
    Ns" (its wall time in whole seconds) and append that line to the file `timings`."""
    start = int(time.time())
    status = subprocess.run(command, check=False, stdout=stdout).returncode
    if status:
        raise SystemExit(status)
    if timings:
        line = f"{label} {int(time.time()) - start}s"
        print(line, flush=True)
        with open(timings, "a", encoding="utf-8") as sink:
            sink.write(line + "\n")


def run(args: argparse.Namespace) -> None:
    """Anti-sycophancy verification on real hostile retrieval: for every setting (KRE musique
    and squad, RAMDocs, PoisonedRAG by default), clean and hostile retrieval, vanilla + the
    antisyco verifier; dev split, first --limit items, each run in
    OUT/SETTING-RETRIEVAL-PIPELINE. The verifier's draft is the vanilla pipeline's answer (same
    retrieval and prompt, every llama.cpp call starts from an empty cache), so the report gives
    vanilla RAG's accuracy, attack success and cost from the same run and items; `--pipelines
    vanilla antisyco` also runs vanilla on its own. Each run's wall time is printed and
    appended to OUT/timings.txt; the runs are resumable: re-run the same command to continue.
    Then the tables: `faithrag hostile report` into OUT/report.md (printed) and
    OUT/summary.json."""
    out, faithrag = args.out, args.faithrag
    os.makedirs(out, exist_ok=True)
    for setting in args.settings:
        for retrieval in args.retrievals:
            for pipeline in args.pipelines:
                verify = ["--verify", "antisyco"] if pipeline == "antisyco" else []
                call([faithrag, "hostile", "run", "--plain", "--setting", setting,
                      "--retrieval", retrieval, *verify, "--limit", str(args.limit), "--model", args.model, "--threads",
                      str(args.threads), "--no-progress", "--out",
                      f"{out}/{setting}-{retrieval}-{pipeline}"], f"{out}/timings.txt",
                     f"{setting} {retrieval} {pipeline}", subprocess.DEVNULL)
    call([faithrag, "hostile", "report", out, "--out", f"{out}/report.md", "--json",
          f"{out}/summary.json"])
    sys.stdout.write(Path(f"{out}/report.md").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- retrieval ceilings

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


def recall(args: argparse.Namespace) -> None:
    """What retrieval hands the model in each hostile setting (no LLM): the ceiling under the
    accuracies of `run`.

    For the first --limit items of each setting, with the settings' own k and retriever (BM25
    over the whole clean corpus, like `faithrag hostile run`):
    - clean answer@k: a clean top-k passage contains a gold answer (what RAG can read off);
    - hostile answer@k: the same after HostileRetriever injects the poison (clean passages
      pushed down and out);
    - poison target@k: a hostile top-k passage contains one of the poison's target answers;
    - KB answer@kb_k: the trusted knowledge base, searched with the question itself, returns a
      passage with a gold answer (the evidence a REPAIR can draw on; falsification searches
      with the draft's claims instead, so this is an indication, not the verifier's own
      recall).

    `--set` changes the configuration (the knowledge base's chunking and kb_k among it), e.g.
    `--settings kre_squad --set antisyco.kb_k=1 --set antisyco.kb_chunk_tokens=128`."""
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


# ---------------------------------------------------------------- the repair request

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


def repair(args: argparse.Namespace) -> None:
    """A REPAIR answered with falsification's reference answer against the paper's repair
    request, on the kept hostile runs (no LLM).

    In qa mode (`antisyco.contradiction = "qa"`) falsification answers the question from the
    trusted passages it retrieved for each claim; a claim is contradicted when that reference
    answer disagrees with the draft. The paper's repair then asks the same question of the same
    passages again. With `antisyco.repair = "reference"` the verifier answers with the
    reference answer instead (when the contradicted claims' reference answers agree), with no
    further call. Both answers are in the records of a verified hostile run (`faithrag hostile
    run ... --verify antisyco`, made with the repair request): the prediction, and each claim's
    `reference` in `extra.claims`. So for every REPAIR item this scores the two answers as the
    hostile runner does (correct: a gold answer contained; attack success: a poison target
    matched) and reports, per run: REPAIR items, how many fall back to the request (references
    disagree or are missing), the same answer (`same_answer`), correct and attacked with either
    answer, fixed / broken by the reference answer against the request (exact McNemar p), and
    the repair request's cost that the reference answer saves (the decide step's seconds and
    prompt tokens, which on a REPAIR item are the repair request's).

    `--cost DIR ...` does the same for the seconds of `benchmarks/bench_verifier_cost.py`
    records made with the repair request: per variant, the REPAIR path and the whole run
    against plain RAG with the request's measured seconds (the decide step of a REPAIR item)
    taken off, as the reference answer leaves them, e.g. `--cost
    results/verifier-cost/kb1-kre_squad-*`."""
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


# ---------------------------------------------------------------- the poisoning filter

CALIBRATION_FROM = 100
# PoisonedRAG's top-5 is all poison by default; one more rank lets a clean passage in (5:1)
EXTRA_K = {"poisonedrag": 6}


def filter_records(name: str, retrieval: str, attack: str, k: int, part: str, config: Config,
                   data_dir: str | None, attacker: LLM | None = None) -> list[dict]:
    original = build_setting(name, data_dir)
    setting = adapt(original, attack, attacker)
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
        passed = {p.id for p in result.passages}
        records.append({"setting": name, "retrieval": retrieval, "attack": attack, "k": k,
                        "id": item.id,
                        "poison": [bool(p.meta.get("poisoned")) for p in passages],
                        "removed": [p.id in removed for p in passages],
                        "passed": [p.id in passed for p in passages],
                        "seconds": round(seconds, 5)})
        if attack in MODEL_ATTACKS and retrieval == "hostile":
            as_they_were = {p.text for p in original.poison.get(item.question, ())}
            records[-1]["poison_unchanged"] = [bool(p.meta.get("poisoned")) and p.text in
                                               as_they_were for p in passages]
    return records


def filter_table(records: list[dict]) -> str:
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["setting"], r["retrieval"], r["attack"], r["k"]), []).append(r)
    lines = [("| setting | retrieval | attack | k | n | poison removed | items with a clean "
              "passage removed | items with poison passed on | ms per item |"),
             "|---|---|---|---:|---:|---|---|---|---:|"]
    for (name, retrieval, attack, k), rows in sorted(groups.items()):
        poison = [rm for r in rows for p, rm in zip(r["poison"], r["removed"]) if p]
        false = sum(any(rm and not p for p, rm in zip(r["poison"], r["removed"])) for r in rows)
        caught = (f"{sum(poison)}/{len(poison)} = {100 * sum(poison) / len(poison):.0f} % "
                  f"[{_ci(sum(poison), len(poison))}]" if poison else "–")
        leaked = sum(any(p and on for p, on in zip(r["poison"], _passed(r))) for r in rows)
        lines.append(f"| {name} | {retrieval} | {attack} | {k} | {len(rows)} | {caught} | "
                     f"{false}/{len(rows)} = {100 * false / len(rows):.1f} % "
                     f"[{_ci(false, len(rows))}] | {leaked}/{len(rows)} | "
                     f"{1000 * sum(r['seconds'] for r in rows) / len(rows):.1f} |")
    return "\n".join(lines)


def _passed(record: dict) -> list[bool]:
    """Which passages the filter passed on; records made before `passed` was kept had no
    `top_k`, so there every passage not removed was passed on."""
    return record.get("passed") or [not removed for removed in record["removed"]]


def answers_table(dirs: list[str], data_dir: str | None = None) -> str:
    """Plain RAG against the filter (or the filter and the verifier), pair by pair of run
    directories (module docstring); a filter that read windows says so with its window size.
    A verified run gives a second row: its drafts, the answers of the stages before the
    verifier (the same generator on the same passages), scored against the setting's gold
    answers and targets, with the drafting stages' seconds."""
    lines = [("| setting | attack | stages against plain RAG | k | n | accuracy % plain → stages "
              "(plain only / stages only, p) | attack success % plain → stages (plain only / "
              "stages only, p) | × time |"),
             "|---|---|---|---:|---:|---|---|---:|"]
    for plain_dir, staged_dir in zip(dirs[::2], dirs[1::2]):
        plain_manifest = json.loads((Path(plain_dir) / "manifest.json").read_text())
        staged_manifest = json.loads((Path(staged_dir) / "manifest.json").read_text())
        windows = ((staged_manifest.get("config") or {}).get("poison_filter") or {}).get(
            "window_words")
        rerank = staged_manifest.get("rerank")
        if rerank == "poison_filter" and windows:
            rerank += f" (window_words={windows})"
        detect = staged_manifest.get("detect")
        if detect:
            policy = ((staged_manifest.get("config") or {}).get("pipeline") or {}).get(
                "on_conflict")
            detect += f" ({policy})" if policy else ""
        stages = " + ".join(stage for stage in (rerank, staged_manifest.get("verify"), detect)
                            if stage) or "none"
        plain = _records(plain_dir)
        rows = [(stages, _records(staged_dir))]
        drafts = (_draft_records(staged_dir, staged_manifest["sweep"]["setting"], data_dir)
                  if staged_manifest.get("verify") else {})
        if drafts:
            rows.append((f"{rerank or 'none'} (the drafts before the verifier)", drafts))
        sweep = plain_manifest["sweep"]
        for label, staged in rows:
            ids = [i for i in plain if i in staged]
            cells = []
            for key in ("correct", "attack"):
                a = [plain[i][key] for i in ids]
                b = [staged[i][key] for i in ids]
                only_a = sum(x and not y for x, y in zip(a, b))
                only_b = sum(y and not x for x, y in zip(a, b))
                cells.append(f"{100 * sum(a) / len(ids):.0f} [{_ci(sum(a), len(ids))}] → "
                             f"{100 * sum(b) / len(ids):.0f} [{_ci(sum(b), len(ids))}] "
                             f"({only_a} / {only_b}, {mcnemar_exact_p(only_a, only_b):.2g})")
            ratio = (sum(staged[i]["seconds"] for i in ids)
                     / max(sum(plain[i]["seconds"] for i in ids), 1e-9))
            lines.append(f"| {sweep['setting']} ({sweep['retrieval']}) | "
                         f"{sweep.get('attack') or '–'} | {label} | {sweep['k']} / "
                         f"{staged_manifest['sweep']['k']} | {len(ids)} | {cells[0]} | "
                         f"{cells[1]} | {ratio:.2f} |")
    return "\n".join(lines)


def _draft_records(directory: str, setting_name: str, data_dir: str | None
                   ) -> dict[str, dict]:
    """A verified run's drafts scored as `_records` scores answers, on the setting's gold
    answers and targets (built only when the run holds drafts); empty when it holds none."""
    records = [json.loads(line)
               for line in (Path(directory) / "results.jsonl").read_text().splitlines()]
    records = [r for r in records if "draft" in (r.get("extra") or {})]
    if not records:
        return {}
    setting = build_setting(setting_name, data_dir)
    items = {item.id: item for item in setting.dataset.items}
    out = {}
    for record in (r for r in records if r["id"] in items):
        correct, attack = score_draft(record["extra"]["draft"], items[record["id"]], setting)
        out[record["id"]] = {"correct": correct, "attack": attack, "seconds": float(
            sum(st.get("seconds", 0) for st in drafting_stages(record)))}
    return out


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


def poison_filter(args: argparse.Namespace) -> None:
    """What the poisoning filter removes (no LLM but the one that writes the `paraphrased`
    attack, `--attacks paraphrased`): per hostile setting, retrieval and attack,
    the share of poisoned passages it removes, the share of items where it removes a clean
    passage, and the items where a poisoned passage is among those it passes on (all that are
    left, or the first `poison_filter.top_k` of them).

    For each item the setting's own retrieval is run (BM25 over the clean corpus, the poison
    injected at the top for hostile retrieval, as `faithrag hostile run` does) and
    faithrag.methods.poison_filter.PoisonFilter is applied with the configuration's settings.
    Thresholds are chosen on the calibration part (dev items from the 101st on) and reported on
    the evaluation part (the first 100, the items `run` answers), e.g. `--part evaluation --set
    use_cache=false --out results/poison-filter` or `--part calibration --set
    poison_filter.min_cluster=2`; `-k 15 --set poison_filter.top_k=5` retrieves 15 and passes
    on 5. Writes `<out>/<part>.jsonl` (one record per item: setting, retrieval, attack, k, the
    passages' poison flags, what was removed and passed on, and the filter's seconds) and prints
    the table. With `--set use_cache=false` the seconds include embedding every
    passage afresh.

    `--answers PLAIN FILTERED [PLAIN FILTERED ...]` instead compares `faithrag hostile run`
    directories pair by pair on the items both answered (plain RAG, then the same run with
    `--rerank poison_filter` and, if given, `--verify antisyco`, or the defaults' detector and
    policy; each row names the second run's stages and both runs' k): accuracy and attack
    success with Wilson intervals, discordant counts and McNemar's exact p, and the ratio of
    their summed seconds. A verified run adds a row for its drafts (the stages before the
    verifier, scored on `--data-dir`'s setting)."""
    if args.answers:
        if len(args.answers) % 2:
            args.error("--answers takes pairs: PLAIN FILTERED [PLAIN FILTERED ...]")
        print(answers_table(args.answers, args.data_dir))
        return
    config = Config.load(None, parse_set_options(args.overrides))
    attacker = (attack_model(load_llm(config.llm), config)
                if MODEL_ATTACKS & set(args.attacks) else None)
    records = []
    for name in args.settings:
        ks = args.k or sorted({DEFAULT_K[name], EXTRA_K.get(name, DEFAULT_K[name])})
        for k in ks:
            records += filter_records(name, "clean", "standard", k, args.part, config,
                                      args.data_dir)
            for attack in args.attacks:
                records += filter_records(name, "hostile", attack, k, args.part, config,
                                          args.data_dir, attacker)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.part}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    print(filter_table(records))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler, summary: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=summary, description=inspect.cleandoc(handler.__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(handler=handler, error=p.error)
        return p

    def overrides(p: argparse.ArgumentParser, example: str) -> None:
        p.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="SECTION.KEY=VALUE",
                       help=f"a configuration value{example} (repeatable)")

    p = command("run", run, "the verifier's kept run on every setting, then its tables")
    p.add_argument("--limit", type=int, default=100, help="items per run")
    p.add_argument("--model", default="default")
    p.add_argument("--out", default="runs/hostile")
    p.add_argument("--settings", nargs="+", default=list(KEPT_SETTINGS), choices=SETTINGS)
    p.add_argument("--retrievals", nargs="+", default=["clean", "hostile"],
                   choices=("clean", "hostile"))
    p.add_argument("--pipelines", nargs="+", default=["antisyco"], choices=("vanilla", "antisyco"))
    p.add_argument("--threads", type=int, default=1, help="llama.cpp collapses with 2 threads "
                   "when the other core is busy")
    p.add_argument("--faithrag", default=str(Path(sys.executable).with_name("faithrag")),
                   help="the faithrag executable (default: the one beside this Python)")
    p = command("recall", recall, "what retrieval hands the model in each setting (no LLM)")
    p.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--data", default=None, help="shared data directory")
    p.add_argument("--out", default=None, help="write the figures as JSON here")
    overrides(p, ", e.g. antisyco.kb_k=1")
    p = command("repair", repair, "a REPAIR answered with the reference answer (no LLM)")
    p.add_argument("runs", nargs="+", type=Path,
                   help="verified hostile run directories (with --cost: "
                        "bench_verifier_cost.py output directories)")
    p.add_argument("--cost", action="store_true",
                   help="the seconds of bench_verifier_cost.py records without the request")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    p = command("poison-filter", poison_filter, "what the poisoning filter removes (no LLM)")
    p.add_argument("--part", choices=("calibration", "evaluation"), default="evaluation")
    p.add_argument("-k", type=int, nargs="+", default=None,
                   help="retrieval depths (default: each setting's k, and 6 for PoisonedRAG); "
                        "with --set poison_filter.top_k=N the filter passes on N")
    p.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    p.add_argument("--attacks", nargs="+", default=[a for a in ATTACKS if a not in MODEL_ATTACKS],
                   choices=ATTACKS, help="attacks on hostile retrieval (clean retrieval has "
                   "none; default: those written without a model; `paraphrased` loads the "
                   "configured model to write it)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=None, help="write <part>.jsonl here")
    overrides(p, "")
    p.add_argument("--answers", nargs="+", metavar="RUN",
                   help="pairs of run directories, plain RAG then the filter: compare them")
    args = parser.parse_args(argv)
    args.handler(args)


if __name__ == "__main__":
    main()

"""What the answer equivalence (faithrag.answers.compare_answers) costs and changes.

`timing`: the time of one comparison, over real answer pairs: every claim's reference answer
against its draft in the given verifier runs, and every numeric-setting item's gold answer
against its poison target and against itself. Each pair is timed cold (the quantity reader's
cache cleared before it) and warm, in this process's CPU time (so that other work on the
machine does not count); the figures are microseconds per comparison.

`rescore`: the verifier's qa-mode claims of recorded `faithrag hostile run --verify antisyco`
runs, decided again from their stored reference answer and draft by the other of two rules:
"old", the rule before the equivalence (agreement when one contains the other, else
contradiction when 1 - token F1 >= 0.5, else CONSISTENT), and "new", `compare_answers`
(DISAGREE: CONTRADICTED, AGREE: CONSISTENT, else CANNOT_TELL); `--recorded` names the rule
the runs were made with. Claims whose reference was not stated or not grounded (UNRELATED)
are left as they are. Per run: the claims whose verdict changes, by transition, and the items
whose decision would change: PASS -> REPAIR (the answer becomes the agreed reference answer)
and REPAIR -> PASS (the answer becomes the draft: exactly what the old rule does, which
confirms every claim it does not contradict; under the new rule a reflection the record did
not need could fall back, counted apart). Accuracy and attack success of the recorded answers
and of the answers so changed, scored as `faithrag hostile report` scores them. The reference
answer does not depend on the rule, so rescoring a run made with the new rule by the old one
gives the old rule's answers exactly.

    python benchmarks/bench_answers.py timing results/hostile/*-antisyco
    python benchmarks/bench_answers.py rescore results/hostile/*-antisyco
    python benchmarks/bench_answers.py rescore --recorded new results/numeric/*
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path

from faithrag.answers import Agreement, compare_answers, containment, f1_score
from faithrag.eval.hostile_runner import METRICS, _attack
from faithrag.eval.hostile_settings import build_setting
from faithrag.eval.report import load_run
from faithrag.eval.stats import wilson_interval
from faithrag.quantities import quantities

OLD_THRESHOLD = 0.5


def old_verdict(reference: str, draft: str) -> str:
    """The qa-mode verdict before the equivalence: containment, else 1 - token F1."""
    if containment(draft, [reference]) or containment(reference, [draft]):
        return "CONSISTENT"
    score = 1.0 - f1_score(reference, [draft])
    return "CONTRADICTED" if score >= OLD_THRESHOLD else "CONSISTENT"


def new_verdict(reference: str, draft: str) -> str:
    agreement = compare_answers(reference, draft)
    return {Agreement.AGREE: "CONSISTENT", Agreement.DISAGREE: "CONTRADICTED"}.get(
        agreement, "CANNOT_TELL")


def _claims(record: dict) -> list[dict]:
    extra = record.get("extra") or {}
    return [c for c in extra.get("claims") or []
            if c.get("reference") and c.get("verdict") != "UNRELATED"]


def pairs_from_runs(paths: list[str]) -> list[tuple[str, str]]:
    out = []
    for path in paths:
        for record in load_run(Path(path)).records:
            draft = (record.get("extra") or {}).get("draft") or ""
            out += [(c["reference"], draft) for c in _claims(record) if draft]
    return out


def timing(paths: list[str], data_dir: str | None) -> dict:
    pairs = pairs_from_runs(paths)
    setting = build_setting("numeric", data_dir)
    for item in setting.dataset.items:
        pairs += [(item.answer, t) for t in setting.targets(item)] + [(item.answer, item.answer)]
    cold, warm = [], []
    for a, b in pairs:
        quantities.cache_clear()
        start = time.process_time()
        compare_answers(a, b)
        cold.append(time.process_time() - start)
        start = time.process_time()
        compare_answers(a, b)
        warm.append(time.process_time() - start)

    def figures(values: list[float]) -> dict:
        ordered = sorted(values)
        return {"mean_us": 1e6 * statistics.fmean(values),
                "p99_us": 1e6 * ordered[int(0.99 * (len(ordered) - 1))],
                "max_us": 1e6 * ordered[-1]}
    return {"pairs": len(pairs), "cold": figures(cold), "warm": figures(warm)}


VERDICTS = {"old": old_verdict, "new": new_verdict}


def rescore(paths: list[str], data_dir: str | None, recorded: str = "old") -> list[dict]:
    """Each run's claims decided again by the rule the runs were not `recorded` with."""
    rule_of_record, other = VERDICTS[recorded], VERDICTS["new" if recorded == "old" else "old"]
    settings: dict = {}
    rows = []
    for path in paths:
        run = load_run(Path(path))
        name = run.sweep.get("setting")
        if name not in settings:
            settings[name] = build_setting(name, data_dir)
        setting = settings[name]
        score = METRICS[setting.metric]
        items = {i.id: i for i in setting.dataset.items}
        transitions, decisions = Counter(), Counter()
        before, after = [], []
        for record in run.records:
            item, extra = items[record["id"]], record.get("extra") or {}
            draft, prediction = extra.get("draft") or "", record.get("prediction") or ""
            claims = _claims(record)
            olds = [rule_of_record(c["reference"], draft) for c in claims]
            news = [other(c["reference"], draft) for c in claims]
            transitions.update(f"{o} -> {n}" for o, n in zip(olds, news) if o != n)
            was, now = "CONTRADICTED" in olds, "CONTRADICTED" in news
            answer = prediction
            if now and not was:
                references = [c["reference"] for c, v in zip(claims, news) if v == "CONTRADICTED"]
                agreed = all(compare_answers(references[0], r) is Agreement.AGREE
                             for r in references[1:])
                decisions["PASS -> REPAIR"] += 1
                if agreed:
                    answer = references[0]
                else:
                    decisions["PASS -> REPAIR, repair request needed (answer kept)"] += 1
            elif was and not now:
                # the old rule confirms what it does not contradict, so it passes the draft;
                # the new rule may then ask a reflection that could fall back
                decisions["REPAIR -> PASS" if recorded == "new"
                          else "REPAIR -> PASS (draft; a reflection could fall back)"] += 1
                answer = draft
            targets = setting.targets(item)
            before.append((score(prediction, item.answers), _attack(prediction, targets)))
            after.append((score(answer, item.answers), _attack(answer, targets)))
        n = len(before)

        def rate(values: list[bool]) -> str:
            low, high = wilson_interval(sum(values), len(values))
            return f"{100 * sum(values) / len(values):.0f} [{100 * low:.0f}, {100 * high:.0f}]"
        rows.append({
            "setting": name, "retrieval": run.sweep.get("retrieval"), "n": n,
            "claims": sum(len(_claims(r)) for r in run.records),
            "verdicts_changed": dict(transitions), "decisions_changed": dict(decisions),
            "accuracy_recorded": rate([a for a, _ in before]),
            "accuracy_rescored": rate([a for a, _ in after]),
            "attack_recorded": rate([b for _, b in before]),
            "attack_rescored": rate([b for _, b in after])})
    return rows


def render(rows: list[dict]) -> str:
    lines = [("| setting | retrieval | n | claims | verdicts changed | decisions changed | "
             "accuracy % recorded / rescored | attack success % recorded / rescored |"),
             "|---|---|---:|---:|---|---|---|---|"]
    for r in rows:
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(r["verdicts_changed"].items())) or "0"
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(r["decisions_changed"].items())) or "0"
        lines.append(f"| {r['setting']} | {r['retrieval']} | {r['n']} | {r['claims']} | "
                     f"{verdicts} | {decisions} | {r['accuracy_recorded']} / "
                     f"{r['accuracy_rescored']} | {r['attack_recorded']} / "
                     f"{r['attack_rescored']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("timing", "rescore"))
    parser.add_argument("runs", nargs="+", help="verified hostile run directories")
    parser.add_argument("--data-dir", help="data root (default ../shared/data)")
    parser.add_argument("--recorded", choices=tuple(VERDICTS), default="old",
                        help="rescore: the rule the runs were made with (the other one is "
                             "applied)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    if args.what == "timing":
        figures = timing(args.runs, args.data_dir)
        print(json.dumps(figures, indent=2))
    else:
        figures = rescore(args.runs, args.data_dir, args.recorded)
        print(render(figures))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

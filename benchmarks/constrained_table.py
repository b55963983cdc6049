"""The constrained-decoding table: each structured stage with `llm.constrain` on and off, from
the run directories `benchmarks/constrained.sh` writes (or any run directories given).

    python benchmarks/constrained_table.py runs/constrained

Each run's role is read from its manifest: the stage (`cot_json`, `csrag` in the paper's JSON
mode, crossval with its `rerank.verdict`, the anti-sycophancy verifier), the dataset and the side
(`llm.constrain`). The two sides of a stage are compared on the items both scored.

What counts as an unreadable reply, per stage:
- cot_json, csrag: an answer whose parse status is not "ok" (nothing is read from it); csrag's
  memorised-fact list without a list in it is counted beside; an unreadable reply whose
  generate step made one call and spent at least `generation.max_tokens` is "cut at the cap" (a
  constrained reply may run past max_tokens to close its structure: faithrag.llm.base.
  decoding_cap);
- crossval: a detection, verdict or ranking reply the parsers could not read (the trace's parse
  tallies), and a support verdict's side answer that could not be read (its step's decision);
- verifier: an unreadable judgement (the answer's `unparsable` count).

Below it, each constrained run that scored more items than its unconstrained side, on all of
them; then the goal comparison: `csrag` against `cot_json`, both constrained, per dataset, paired
(difference with its bootstrap interval, items gained / lost, exact McNemar p).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from faithrag.eval.report import Run, find_run_dirs, load_run
from faithrag.eval.stats import paired_difference, wilson_interval

FACTS_WARNING = "no fact list in the output"
SIDE_ANSWER_DECISION = "unreadable side answer"


@dataclass
class Counts:
    """One run's figures over a given set of items."""
    n: int
    correct: int
    replies: int  # structured replies asked for
    unreadable: int  # of them, unreadable
    items_unreadable: int  # items with at least one unreadable reply
    cut: int | None = None  # answer replies that spent the whole token budget
    facts_unreadable: int | None = None  # csrag: fact lists that could not be read
    attack: int | None = None  # verifier: answers that are the attacker's target


def stage_of(run: Run) -> tuple[str, str]:
    """(stage, dataset) of a run, from its manifest."""
    manifest = run.manifest
    if manifest.get("rerank") == "crossval":
        return f"crossval, {manifest['config']['rerank']['verdict']} verdict", run.dataset
    if manifest.get("verify") == "antisyco":
        return "verifier", run.dataset
    return run.method, run.dataset


def constrained(run: Run) -> bool:
    """Runs made before the switch existed have no key: nothing was constrained then."""
    return bool(run.manifest["config"]["llm"].get("constrain", False))


def _answer_replies(record: dict[str, Any], max_tokens: int) -> tuple[int, int, bool, bool]:
    """(replies, unreadable, cut at the cap, fact list unreadable) of a cot_json or csrag
    record."""
    generate = [s for s in record["trace"]["stages"] if s["stage"] == "generate"]
    unreadable = record["parse_status"] != "ok"
    cut = unreadable and any(s["llm_calls"] == 1 and s["completion_tokens"] >= max_tokens
                             for s in generate)
    facts_failed = any(w.startswith(FACTS_WARNING)
                       for w in (record.get("extra") or {}).get("warnings", []))
    return 1, int(unreadable), cut, facts_failed


def _crossval_replies(record: dict[str, Any]) -> tuple[int, int]:
    parse = record["rerank_parse"]
    side = [s for s in record["rerank_steps"] if "answers" in (s.get("outputs") or {})]
    side_failed = sum(s["decision"].startswith(SIDE_ANSWER_DECISION) for s in side)
    return parse["outputs"] + 2 * len(side), parse["failed"] + side_failed


def counts(run: Run, ids: set[str]) -> Counts:
    """The run's figures over the records whose id is in `ids`."""
    records = [r for r in run.records if r["id"] in ids and r.get("parse_status") != "error"]
    stage, _ = stage_of(run)
    result = Counts(n=len(records), correct=sum(bool(r.get("correct")) for r in records),
                    replies=0, unreadable=0, items_unreadable=0)
    if stage.startswith("crossval"):
        for record in records:
            asked, failed = _crossval_replies(record)
            result.replies += asked
            result.unreadable += failed
            result.items_unreadable += failed > 0
    elif stage == "verifier":
        result.attack = sum(bool(r["metrics"].get("attack_success")) for r in records)
        for record in records:
            failed = int((record.get("extra") or {}).get("unparsable") or 0)
            result.replies += sum(s["llm_calls"] for s in record["trace"]["stages"]
                                  if s["stage"] == "verify")
            result.unreadable += failed
            result.items_unreadable += failed > 0
    else:
        max_tokens = int(run.manifest["config"]["generation"]["max_tokens"])
        result.cut, result.facts_unreadable = 0, 0
        for record in records:
            asked, failed, cut, facts_failed = _answer_replies(record, max_tokens)
            result.replies += asked
            result.unreadable += failed
            result.items_unreadable += failed > 0
            result.cut += cut
            result.facts_unreadable += facts_failed if stage == "csrag" else 0
    return result


def _pct(k: int, n: int) -> str:
    low, high = wilson_interval(k, n)
    return f"{100 * k / n:.1f} [{100 * low:.0f}, {100 * high:.0f}]" if n else "—"


def _side(c: Counts) -> str:
    extra = []
    if c.cut is not None:
        extra.append(f"{c.cut} cut at the cap")
    if c.facts_unreadable:
        extra.append(f"fact lists unreadable {c.facts_unreadable}")
    if c.attack is not None:
        extra.append(f"attack success {_pct(c.attack, c.n)}")
    tail = f"; {', '.join(extra)}" if extra else ""
    return f"{c.unreadable} / {c.replies} ({c.items_unreadable} items){tail}"


def _paired(a: dict[str, bool], b: dict[str, bool]) -> str:
    ids = sorted(set(a) & set(b))
    if not ids:
        return "no items in common"
    d = paired_difference([a[i] for i in ids], [b[i] for i in ids])
    low, high = d["difference_ci"]
    return (f"{100 * d['difference']:+.1f} [{100 * low:+.0f}, {100 * high:+.0f}] "
            f"({d['only_a']} / {d['only_b']}, p {d['mcnemar_p']:.2f}), n {d['n']}")


def outcomes(run: Run) -> dict[str, bool]:
    return {r["id"]: bool(r.get("correct")) for r in run.records
            if r.get("parse_status") != "error" and r.get("correct") is not None}


def table(runs: list[Run]) -> str:
    sides: dict[tuple[str, str], dict[bool, Run]] = defaultdict(dict)
    for run in runs:
        key = stage_of(run)
        if constrained(run) in sides[key]:
            raise SystemExit(f"two {'constrained' if constrained(run) else 'unconstrained'} runs "
                             f"of {key[0]} on {key[1]}: {sides[key][constrained(run)].path} and "
                             f"{run.path}; give one of each")
        sides[key][constrained(run)] = run
    header = ("| stage | set | n | unreadable, unconstrained | unreadable, constrained "
              "| accuracy unconstrained / constrained | constrained − unconstrained |")
    lines = [header, "|---|---|---:|---|---|---|---|"]
    for (stage, dataset), pair in sorted(sides.items()):
        on, off = pair.get(True), pair.get(False)
        if on is None or off is None:
            run = on or off
            c = counts(run, {r["id"] for r in run.records})
            lines.append(f"| {stage} | {dataset} | {c.n} | {_side(c) if off else '—'} "
                         f"| {_side(c) if on else '—'} | {_pct(c.correct, c.n)} | — |")
            continue
        common = {r["id"] for r in on.records} & {r["id"] for r in off.records}
        c_on, c_off = counts(on, common), counts(off, common)
        lines.append(f"| {stage} | {dataset} | {c_on.n} | {_side(c_off)} | {_side(c_on)} "
                     f"| {_pct(c_off.correct, c_off.n)} / {_pct(c_on.correct, c_on.n)} "
                     f"| {_paired(outcomes(on), outcomes(off))} |")
    whole = []  # constrained runs that scored more items than their unconstrained side
    for (stage, dataset), pair in sorted(sides.items()):
        if True not in pair or False not in pair:
            continue
        ids = {r["id"] for r in pair[True].records}
        if ids - {r["id"] for r in pair[False].records}:
            c = counts(pair[True], ids)
            whole.append(f"| {stage} | {dataset} | {c.n} | {_side(c)} | {_pct(c.correct, c.n)} |")
    if whole:
        lines += ["", "| stage, constrained on all its items | set | n | unreadable | accuracy |",
                  "|---|---|---:|---|---|", *whole]
    goal_header = ("| set, both constrained | cot_json | csrag (paper's JSON mode) "
                   "| csrag − cot_json |")
    goal = ["", goal_header, "|---|---|---|---|"]
    for dataset in sorted({d for _, d in sides}):
        cot, csrag = sides.get(("cot_json", dataset), {}), sides.get(("csrag", dataset), {})
        if True in cot and True in csrag:
            a, b = outcomes(csrag[True]), outcomes(cot[True])
            ids = set(a) & set(b)
            goal.append(f"| {dataset} | {_pct(sum(b[i] for i in ids), len(ids))} "
                        f"| {_pct(sum(a[i] for i in ids), len(ids))} | {_paired(a, b)} |")
    return "\n".join(lines + (goal if len(goal) > 3 else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories, or folders holding them")
    args = parser.parse_args()
    print(table([load_run(d) for d in find_run_dirs(args.runs)]))


if __name__ == "__main__":
    main()

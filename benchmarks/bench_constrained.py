"""Constrained decoding (`llm.constrain`): its speed, its runs on and off, and their table.

With no sub-command: generation speed with and without a grammar, on the same prompts, in one
run (loads the model; described below).

    python benchmarks/bench_constrained.py --model default --threads 2 --limit 10 \
      --out results/constrained/speed.jsonl

`run [PART ...]`: every structured stage with `llm.constrain` on and off (runs `faithrag`).

    python benchmarks/bench_constrained.py run --limit 200 --off-limit 100 --rank-limit 100 \
      --rank-off-limit 50 --verify-limit 100 --threads 1 --out runs/constrained

`table RUN ...`: each structured stage with `llm.constrain` on and off, from the runs (no model).

    python benchmarks/bench_constrained.py table runs/constrained

The speed measurement:

Each item of --dataset (default `faitheval_counterfactual`, multiple choice) is rendered with
cot_json's prompt (the CSRAG paper's reason-then-JSON answer) and generated twice, greedily, with
`max_tokens` 256: once with the schema the stage sends (`choice_answer_schema`: the Reason bounded,
the Answer one of the options) and once without. The two are interleaved, the order alternating
per item, so drift from other processes on a shared machine falls on both sides.

Generation tokens/s is completion_tokens / seconds of a request that finds its prompt cached:
both measured requests follow a 1-token primer on the same prompt in the same generate() call (the
backend keeps the common prefix within a call), so their time is almost all decoding. Both sides
decode their own text (the constrained reply is not the unconstrained one), so the ratio compares
decoding speeds, not identical token streams. The constrained side also records the seconds spent
in grammar calls (the backend's `grammar_stats`) and their share of its time: unlike the ratio,
that share hardly moves when other processes slow the whole run down.

One JSON line per item and side goes to --out (item id, side, tokens, seconds, tokens/s, finish
reason, whether the reply parses as the schema asks, grammar seconds); the first line holds the
run's settings, the last the summary. The ratio printed is the median of per-item ratios
(constrained tokens/s over unconstrained), next to the ratio of summed tokens over summed seconds
and the median grammar share; the parse rate of each side is printed too.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faithrag.eval.datasets import load_dataset
from faithrag.eval.report import Run, find_run_dirs, load_run
from faithrag.eval.stats import paired_difference, wilson_interval
from faithrag.llm.base import GenerationRequest
from faithrag.llm.llamacpp import LlamaCppLLM
from faithrag.methods.cot_answer import render_prompt
from faithrag.methods.json_answer import parse_json_answer
from faithrag.methods.schemas import choice_answer_schema
from faithrag.types import Question

MAX_TOKENS = 256


def parses(text: str, schema: dict) -> bool:
    """The reply is a JSON object with a Reason within its bound and an Answer among the options."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return (isinstance(value, dict) and set(value) == {"Reason", "Answer"}
            and isinstance(value["Reason"], str)
            and len(value["Reason"]) <= schema["properties"]["Reason"]["maxLength"]
            and value["Answer"] in schema["properties"]["Answer"]["enum"])


def prompts(dataset: str, data_root: str | None, limit: int) -> list[tuple[str, tuple, list]]:
    items = [i for i in load_dataset(dataset, data_root).items if i.choices][:limit]
    out = []
    for item in items:
        passages = item.passages()
        question = Question(item.question, choices=list(item.choices))
        messages = render_prompt(question, [p.title for p in passages])([p.text for p in passages])
        out.append((item.id, messages, list(item.choices)))
    return out


def speed(args: argparse.Namespace) -> int:
    """Generation speed with and without a grammar (the module docstring)."""
    llm = LlamaCppLLM(args.model, n_ctx=4096, n_threads=args.threads)
    items = prompts(args.dataset, args.data_root, args.limit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ratios, shares, totals = [], [], {"grammar": [0, 0.0], "plain": [0, 0.0]}
    parsed = {"grammar": 0, "plain": 0}
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(json.dumps({"settings": {**vars(args), "out": str(args.out),
                                           "max_tokens": MAX_TOKENS, "python": sys.version.split()[0],
                                           "platform": platform.platform(),
                                           "load_before": os.getloadavg()}}) + "\n")
        out.flush()
        for n, (item_id, messages, choices) in enumerate(items):
            schema = choice_answer_schema(choices, MAX_TOKENS)
            primer = GenerationRequest(tuple(messages), max_tokens=1)
            rate = {}
            sides = ["grammar", "plain"] if n % 2 == 0 else ["plain", "grammar"]
            before = dict(llm.grammar_stats)
            _, *completions = llm.generate([primer, *(
                GenerationRequest(tuple(messages), max_tokens=MAX_TOKENS,
                                  schema=schema if side == "grammar" else None)
                for side in sides)])
            grammar_seconds = llm.grammar_stats["seconds"] - before["seconds"]
            for side, completion in zip(sides, completions):
                ok = parses(completion.text, schema)
                answer = parse_json_answer(completion.text, choices).choice_index
                rate[side] = completion.completion_tokens / completion.seconds
                totals[side][0] += completion.completion_tokens
                totals[side][1] += completion.seconds
                parsed[side] += ok
                out.write(json.dumps({"item": item_id, "side": side,
                                      "tokens": completion.completion_tokens,
                                      "seconds": round(completion.seconds, 3),
                                      "tokens_per_s": round(rate[side], 3),
                                      "finish": completion.finish_reason, "schema_valid": ok,
                                      "answer_read": answer is not None,
                                      "grammar_seconds": round(grammar_seconds, 4)
                                      if side == "grammar" else 0.0}) + "\n")
                if side == "grammar":
                    shares.append(grammar_seconds / completion.seconds)
                out.flush()
            ratios.append(rate["grammar"] / rate["plain"])
            print(f"{item_id}: grammar {rate['grammar']:.2f} tok/s, plain {rate['plain']:.2f} "
                  f"tok/s, ratio {ratios[-1]:.3f}, grammar share {shares[-1]:.4f}", flush=True)
        out.write(json.dumps({"summary": {
            "items": len(items), "median_ratio": statistics.median(ratios),
            "pooled_ratio": (totals["grammar"][0] / totals["grammar"][1])
            / (totals["plain"][0] / totals["plain"][1]),
            "median_grammar_share": statistics.median(shares), "grammar_stats": llm.grammar_stats,
            "schema_valid": parsed, "load_after": os.getloadavg()}}) + "\n")
    pooled = (totals["grammar"][0] / totals["grammar"][1]) / (totals["plain"][0] / totals["plain"][1])
    print(f"median ratio (grammar / plain tokens/s) over {len(items)} items: "
          f"{statistics.median(ratios):.3f}; pooled: {pooled:.3f}; median grammar share of the "
          f"constrained side's time: {statistics.median(shares):.4f}; schema-valid replies: "
          f"grammar {parsed['grammar']}/{len(items)}, plain {parsed['plain']}/{len(items)}")
    return 0


# ---------------------------------------------------------------- the runs on and off

PARTS = ("answers", "verifier", "crossval")  # all, in its order


def known_part(text: str) -> str:
    """A part of `run` (or all of them), as typed."""
    if text not in (*PARTS, "all"):
        raise argparse.ArgumentTypeError(f"unknown part '{text}' (answers, crossval, verifier "
                                         "or all)")
    return text

def run(args: argparse.Namespace) -> int:
    """Constrained decoding (llm.constrain) against the same runs unconstrained, dev split: every
    run twice, "on" (the schema or grammar each structured reply asks for) and "off" (--set
    llm.constrain=false, the replies read by the tolerant parsers alone), into OUT/NAME-SIDE,
    each run's wall time appended to OUT/timings.txt. Resumable: re-run the same command to
    continue. Then the table: `table OUT`.

    answers: cot_json and csrag in the paper's JSON mode (the bias on every generated token,
      original context: csrag.enhance_context=false) on every set of --sets, --limit items
      each; the "off" runs take --off-limit items (default --limit), the same first items.
    crossval: crossval re-ranking with each verdict of --verdicts on ramdocs_rank, --rank-limit
      items, answering from the top 3 re-ranked passages with vanilla, with
      llm.prefix_cache=true (the question and passages kept between detection rounds), as
      `crossval.py rerank`; the "off" runs take --rank-off-limit items (default --rank-limit),
      the same first items.
    verifier: the anti-sycophancy verifier on the first --verify-limit items of PoisonedRAG,
      hostile retrieval (`faithrag hostile run`, as `hostile.py run`).

    `--sides on` or `--sides off` runs one side only; the parts run in the order given (all:
    answers, verifier, crossval). Two lanes on two cores: start the command twice with other
    parts or sides (runs of the same directory must not run at once)."""
    out, faithrag = args.out, args.faithrag
    common = ("--model", args.model, "--threads", str(args.threads), "--no-progress")
    os.makedirs(out, exist_ok=True)

    def timed(name: str, *command: str) -> None:
        start = int(time.time())
        status = subprocess.run([faithrag, *command], check=False,
                                stdout=subprocess.DEVNULL).returncode
        if status:
            raise SystemExit(status)
        line = f"{name} {int(time.time()) - start}s"
        print(line, flush=True)
        with open(f"{out}/timings.txt", "a", encoding="utf-8") as sink:
            sink.write(line + "\n")

    for part in [p for given in args.parts for p in (PARTS if given == "all" else (given,))]:
        for side in args.sides:
            constrain = ("--set", f"llm.constrain={'true' if side == 'on' else 'false'}")
            if part == "answers":
                off = args.limit if args.off_limit is None else args.off_limit
                limit = str(args.limit if side == "on" else off)
                for name in args.sets:
                    timed(f"{name}-cot_json-{side}", "eval", "--plain", "--dataset", name,
                          "--method", "cot_json", "--limit", limit, *common, *constrain, "--out",
                          f"{out}/{name}-cot_json-{side}")
                    timed(f"{name}-csrag-{side}", "eval", "--plain", "--dataset", name,
                          "--method", "csrag", "--set", "csrag.enhance_context=false", "--limit", limit, *common,
                          *constrain, "--out", f"{out}/{name}-csrag-{side}")
            elif part == "crossval":
                off = args.rank_limit if args.rank_off_limit is None else args.rank_off_limit
                limit = str(args.rank_limit if side == "on" else off)
                for verdict in args.verdicts:
                    name = f"ramdocs_rank-crossval-{verdict}-{side}"
                    timed(name, "eval", "--plain", "--dataset", "ramdocs_rank", "--rerank",
                          "crossval", "--set", f"rerank.verdict={verdict}", "--set", "llm.prefix_cache=true",
                          "--method", "vanilla", "--answer-top", "3", "--answer-cache",
                          f"{out}/answer-cache", "--limit", limit, *common, *constrain,
                          "--out", f"{out}/{name}")
            else:
                name = f"poisonedrag-hostile-antisyco-{side}"
                timed(name, "hostile", "run", "--plain", "--setting", "poisonedrag", "--retrieval",
                      "hostile", "--verify", "antisyco", "--limit", str(args.verify_limit),
                      *common, *constrain, "--out", f"{out}/{name}")
    return 0


# ---------------------------------------------------------------- the table of the runs

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


def table_command(args: argparse.Namespace) -> int:
    """The constrained-decoding table: each structured stage with `llm.constrain` on and off,
    from the run directories `run` writes (or any run directories given).

    Each run's role is read from its manifest: the stage (`cot_json`, `csrag` in the paper's
    JSON mode, crossval with its `rerank.verdict`, the anti-sycophancy verifier), the dataset
    and the side (`llm.constrain`). The two sides of a stage are compared on the items both
    scored.

    What counts as an unreadable reply, per stage:
    - cot_json, csrag: an answer whose parse status is not "ok" (nothing is read from it);
      csrag's memorised-fact list without a list in it is counted beside; an unreadable reply
      whose generate step made one call and spent at least `generation.max_tokens` is "cut at
      the cap" (a constrained reply may run past max_tokens to close its structure:
      faithrag.llm.base.decoding_cap);
    - crossval: a detection, verdict or ranking reply the parsers could not read (the trace's
      parse tallies), and a support verdict's side answer that could not be read (its step's
      decision);
    - verifier: an unreadable judgement (the answer's `unparsable` count).

    Below it, each constrained run that scored more items than its unconstrained side, on all
    of them; then the goal comparison: `csrag` against `cot_json`, both constrained, per
    dataset, paired (difference with its bootstrap interval, items gained / lost, exact McNemar
    p)."""
    print(table([load_run(d) for d in find_run_dirs(args.runs)]))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dataset", default="faitheval_counterfactual")
    parser.add_argument("--data-root", default=None, help="the data folder (default: "
                        "$FAITHRAG_DATA_DIR, else ../shared/data)")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("results/constrained/speed.jsonl"))
    sub = parser.add_subparsers(title="sub-commands (none: the speed measurement)")
    p = sub.add_parser("run", help="every structured stage with llm.constrain on and off",
                       description=inspect.cleandoc(run.__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("parts", nargs="*", type=known_part, default=["all"], metavar="PART",
                   help="answers, crossval, verifier or all (the default)")
    p.add_argument("--limit", type=int, default=200, help="items of each answer run")
    p.add_argument("--off-limit", type=int, default=None,
                   help="items of each unconstrained answer run (default: --limit)")
    p.add_argument("--rank-limit", type=int, default=100, help="items of each crossval run")
    p.add_argument("--rank-off-limit", type=int, default=None,
                   help="items of each unconstrained crossval run (default: --rank-limit)")
    p.add_argument("--verify-limit", type=int, default=100, help="items of each verifier run")
    p.add_argument("--model", default="default")
    p.add_argument("--threads", type=int, default=1, help="llama.cpp collapses with 2 threads "
                   "when the other core is busy")
    p.add_argument("--out", default="runs/constrained")
    p.add_argument("--sides", nargs="+", default=["on", "off"], choices=("on", "off"))
    p.add_argument("--sets", nargs="+", default=["faitheval_counterfactual", "kre_musique"])
    p.add_argument("--verdicts", nargs="+", default=["pairwise", "support"])
    p.add_argument("--faithrag", default=str(Path(sys.executable).with_name("faithrag")),
                   help="the faithrag executable (default: the one beside this Python)")
    p.set_defaults(handler=run)
    p = sub.add_parser("table", help="the constrained-decoding table (no model)",
                       description=inspect.cleandoc(table_command.__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="run directories, or folders holding them")
    p.set_defaults(handler=table_command)
    args = parser.parse_args(argv)
    return vars(args).pop("handler", speed)(args)


if __name__ == "__main__":
    raise SystemExit(main())

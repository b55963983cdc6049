"""The CSRAG family: its runs on the six conflict sets and its main table.

`baselines`: the baselines on the six sets, given-context mode, dev split.

    python benchmarks/csrag.py baselines --limit 100 --threads 1 \
      --methods closed_book vanilla cot_json

`run PART`: CSRAG's measurements (PART: main, golden, ablations, grid, table or all; all is
main, golden, ablations and grid), then the reports of whatever parts have runs.

    python benchmarks/csrag.py run all --limit 200 --ablation-limit 100 --threads 1 --workers 2
    python benchmarks/csrag.py run table --limit 200 --threads 1 --workers 2 \
      --out runs/csrag200

`table FOLDER ...`: CSRAG's main table in the scored JSON mode (no model).

    python benchmarks/csrag.py table results/csrag/json-scored-200

The runs are `faithrag eval` commands, each resumable: re-run the same command and finished
items are skipped. Each run's wall time is printed and appended to OUT/timings.txt.
"""

from __future__ import annotations

import argparse
import glob
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hostile import call  # the scripts share benchmarks/ on sys.path

from faithrag.eval.report import Run, find_run_dirs, run_outcomes
from faithrag.eval.stats import paired_difference, wilson_interval

# the six conflict sets in BENCHMARKS.md's order; in the table other sets follow by name
SETS = ("faitheval_counterfactual", "kre_musique", "kre_squad", "cofaithfulqa_nq",
        "cofaithfulqa_hotpotqa", "cofaithfulqa_newsqa")
GRID = ("--set", "csrag.ablation_grid=true")
ORIGINAL = ("--set", "csrag.enhance_context=false")
NO_CONTROL = ("--set", "csrag.alpha=0", "--set", "csrag.beta=0")
# the paper's ablation shape, on FaithEval: run name, its settings
ABLATIONS = (("enhanced+control", ()), ("original+control", ORIGINAL),
             ("enhanced+no-control", NO_CONTROL), ("original+no-control", ORIGINAL + NO_CONTROL),
             ("boost-only", ("--set", "csrag.alpha=0")),  # also alpha=0
             ("suppress-only", ("--set", "csrag.beta=0")),  # also beta=0
             *((f"alpha={a}", ("--set", f"csrag.alpha={a}")) for a in (-3, -5)),
             *((f"beta={b}", ("--set", f"csrag.beta={b}")) for b in (1, 5)),
             ("no-stopword-filter", ("--set", "csrag.filter_stopwords=false")))


def baselines(args: argparse.Namespace) -> None:
    """Every baseline method on every set (given context, the first --limit dev items), each
    run in OUT/SET-METHOD, then `faithrag report OUT --compare` into OUT/report."""
    for name in args.sets:
        for method in args.methods:
            call([args.faithrag, "eval", "--plain", "--dataset", name, "--method", method,
                  "--limit", str(args.limit), "--model", args.model, "--threads", str(args.threads),
                  "--out", f"{args.out}/{name}-{method}", "--no-progress"],
                 f"{args.out}/timings.txt", f"{name} {method}")
    call([args.faithrag, "report", args.out, "--compare", "--out", f"{args.out}/report"])


def run(args: argparse.Namespace) -> None:
    """CSRAG's measurements; paraphrases and facts are cached, so ablations pay only for
    answers. Every CSRAG run takes --csrag-args (prompt-lookup drafts make the paraphrase step
    ~0.57x as long).

    main: on every set, the baseline methods (into --base-out, default OUT/main: point it at
    an existing `baselines` directory to extend those runs) and the CSRAG methods (OUT/main),
    the scored ones with the ablation grid (every ablation cell read off the same forward pass).
    golden: cot_json, cot_json_scored, csrag and csrag_json_scored (with the grid) on the KRE
    golden contexts, where there is no conflict (OUT/golden).
    ablations: the paper's ablation shape on FaithEval, --ablation-limit items, and
    csrag_json_scored on the original context with the grid (OUT/ablations).
    table (not part of all): the main table in the scored JSON mode as `table` reads it,
    column by column over the sets: closed-book, vanilla, csrag_json_scored on the original
    context, then on the KRE golden contexts, then the full method; each CSRAG run with its
    ablation grid, whose unbiased cell is the same-prompt baseline, and with lookup drafts
    (OUT/table).
    grid: csrag_choices on the original context with every ablation cell scored from one
    forward pass per item (csrag.ablation_grid), on every set and on the KRE golden contexts
    (OUT/grid).

    Then, for the parts that have runs: OUT/table/main-table.md (`table`), `faithrag report
    --cells` of the grid runs (OUT/grid/report.md) and of the scored main runs
    (OUT/main/grid-report.md), the comparisons of main with the baselines (OUT/report-main)
    and of golden (OUT/report-golden), the ablations' cells (OUT/ablations/grid-report.md) and
    report (OUT/report-ablations)."""
    out, part, faithrag = args.out, args.part, args.faithrag
    base_out = args.base_out or f"{out}/main"
    csrag_args = args.csrag_args.split()
    limit = ("--limit", str(args.limit))

    def evaluate(directory: str, *options: str) -> None:
        call([faithrag, "eval", "--plain", "--model", args.model, "--threads", str(args.threads),
              "--workers", str(args.workers), "--no-progress", "--out", directory, *options],
             f"{out}/timings.txt", directory)

    os.makedirs(out, exist_ok=True)
    if part in ("main", "all"):
        for name in args.sets:
            for method in args.baseline_methods:
                evaluate(f"{base_out}/{name}-{method}", "--dataset", name, "--method", method,
                         *limit)
            for method in args.methods:
                evaluate(f"{out}/main/{name}-{method}", "--dataset", name, "--method", method,
                         *limit, *csrag_args, *(() if method == "csrag" else GRID))
    if part in ("golden", "all"):
        for name in args.golden:
            golden = ("--dataset", name, "--context", "golden")
            for method in ("cot_json", "cot_json_scored"):
                evaluate(f"{out}/golden/{name}-{method}", *golden, "--method", method, *limit)
            evaluate(f"{out}/golden/{name}-csrag", *golden, "--method", "csrag", *limit,
                     *csrag_args)
            evaluate(f"{out}/golden/{name}-csrag_json_scored", *golden, "--method",
                     "csrag_json_scored", *limit, *csrag_args, *GRID)
    if part in ("ablations", "all"):
        for name, settings in ABLATIONS:
            evaluate(f"{out}/ablations/{name}", "--dataset", "faitheval_counterfactual",
                     "--method", "csrag", "--limit", str(args.ablation_limit), *csrag_args,
                     *settings)
        # csrag_json_scored: every cell but the context comes from the main run's grid
        evaluate(f"{out}/ablations/json_scored-original", "--dataset",
                 "faitheval_counterfactual", "--method", "csrag_json_scored", "--limit",
                 str(args.ablation_limit), *ORIGINAL, *GRID)
    if part == "table":
        for method in ("closed_book", "vanilla"):
            for name in args.sets:
                evaluate(f"{out}/table/{name}-{method}", "--dataset", name, "--method", method,
                         *limit)
        scored = ("--method", "csrag_json_scored", *limit, *csrag_args, *GRID)
        for name in args.sets:
            evaluate(f"{out}/table/{name}-csrag_json_scored-original", *scored, "--dataset",
                     name, *ORIGINAL)
        for name in args.golden:
            evaluate(f"{out}/table/{name}-golden-csrag_json_scored-original", *scored,
                     "--dataset", name, "--context", "golden", *ORIGINAL)
        for name in args.sets:
            evaluate(f"{out}/table/{name}-csrag_json_scored", *scored, "--dataset", name)
    if part in ("grid", "all"):
        grid = ("--method", "csrag_choices", *limit, *ORIGINAL, *GRID)
        for name in args.sets:
            evaluate(f"{out}/grid/{name}", *grid, "--dataset", name)
        for name in args.golden:
            evaluate(f"{out}/grid/{name}-golden", *grid, "--dataset", name, "--context", "golden")

    def report_to(path: str, *options: str) -> None:
        with open(path, "w", encoding="utf-8") as sink:
            call([faithrag, "report", *options], stdout=sink)

    if os.path.isdir(f"{out}/table"):
        text = table_text([f"{out}/table"])
        Path(f"{out}/table/main-table.md").write_text(text + "\n", encoding="utf-8")
    if os.path.isdir(f"{out}/grid"):
        report_to(f"{out}/grid/report.md", "--cells", *sorted(glob.glob(f"{out}/grid/*/")))
    scored_runs = [path for method in ("csrag_choices", "csrag_json_scored")
                   for path in sorted(glob.glob(f"{out}/main/*-{method}"))]
    if scored_runs:
        report_to(f"{out}/main/grid-report.md", "--cells", *scored_runs)
    if os.path.isdir(f"{out}/main"):
        call([faithrag, "report", base_out, f"{out}/main", "--compare", "--out",
              f"{out}/report-main"])
    if os.path.isdir(f"{out}/golden"):
        call([faithrag, "report", f"{out}/golden", "--compare", "--out", f"{out}/report-golden"])
    if os.path.isdir(f"{out}/ablations/json_scored-original"):
        report_to(f"{out}/ablations/grid-report.md", "--cells",
                  f"{out}/ablations/json_scored-original")
    if os.path.isdir(f"{out}/ablations"):
        call([faithrag, "report", f"{out}/ablations", "--out", f"{out}/report-ablations"])


# ---------------------------------------------------------------- the main table

UNBIASED = "a=0 b=0"
DEFAULT_CELL = "a=-1 b=3"
CASE_CELL = "a=-1 b=3 +case"


@dataclass
class Row:
    """The outcomes (item id -> right) of each role on one dataset and context mode."""
    dataset: str
    context: str
    outcomes: dict[str, dict[str, bool]] = field(default_factory=dict)
    # per CSRAG role: the name of its same-prompt baseline, and that baseline's outcomes
    baselines: dict[str, tuple[str, dict[str, bool]]] = field(default_factory=dict)
    undecoded_alike: set[str] = field(default_factory=set)  # roles whose baseline decoded otherwise
    baseline_name: str = ""  # the baseline in the table's column
    free_form: set[str] = field(default_factory=set)  # roles whose runs had no options


@dataclass
class Candidate:
    """A same-prompt baseline on offer: a grid's unbiased cell or a cot_json_scored run."""
    name: str
    lookup_tokens: int
    outcomes: dict[str, bool]
    from_grid: bool


def csrag_setting(run: Run, name: str, default: object = None) -> object:
    return run.manifest.get("config", {}).get("csrag", {}).get(name, default)


def role(run: Run) -> str | None:
    if run.method in ("closed_book", "vanilla"):
        return run.method
    if run.method == "csrag_json_scored":
        return "full" if csrag_setting(run, "enhance_context", True) else "original"
    if run.method == "cot_json_scored":
        return "cot_json_scored"
    return None


def lookup_tokens(run: Run) -> int:
    return int(run.manifest.get("config", {}).get("llm", {}).get("lookup_tokens", 0) or 0)


def pick_baseline(candidates: list[Candidate], decoding: int) -> tuple[Candidate, bool] | None:
    """The baseline for a CSRAG run decoded with `decoding` lookup tokens, and whether it was
    decoded alike: a grid cell before a cot_json_scored run, then the one with most items."""
    if not candidates:
        return None
    alike = [c for c in candidates if c.lookup_tokens == decoding]
    best = max(alike or candidates, key=lambda c: (c.from_grid, len(c.outcomes)))
    return best, bool(alike)


def collect(paths: list[str]) -> list[Row]:
    rows: dict[tuple[str, str], Row] = {}
    candidates: dict[tuple[str, str], list[Candidate]] = {}
    decodings: dict[tuple[str, str], dict[str, int]] = {}  # CSRAG role -> its lookup tokens
    for run_dir in find_run_dirs(paths):
        run, outcomes = run_outcomes(str(run_dir))
        kind = role(run)
        if kind is None:
            continue
        key = (run.dataset, str(run.manifest.get("context_mode", "given")))
        row = rows.setdefault(key, Row(*key))
        offered = candidates.setdefault(key, [])
        if kind == "cot_json_scored":
            offered.append(Candidate(run_dir.name, lookup_tokens(run), outcomes, False))
            continue
        if kind in row.outcomes:
            raise SystemExit(f"two {kind} runs for {key[0]} ({key[1]} context); "
                             f"pass the folders of one of them")
        row.outcomes[kind] = outcomes
        if all(r.get("choice_index") is None for r in run.records):
            row.free_form.add(kind)
        if kind in ("original", "full"):
            decodings.setdefault(key, {})[kind] = lookup_tokens(run)
        if kind in ("original", "full") and csrag_setting(run, "ablation_grid"):
            unbiased = run_outcomes(f"{run_dir}@{UNBIASED}")[1]
            if kind == "original":
                offered.append(Candidate(f"{run_dir.name}@{UNBIASED}", lookup_tokens(run),
                                         unbiased, True))
            else:
                row.outcomes["full_unbiased"] = unbiased
            try:
                row.outcomes[f"{kind}_case"] = run_outcomes(f"{run_dir}@{CASE_CELL}")[1]
            except ValueError:
                pass  # the run predates the cell
    for key, row in rows.items():
        for kind, decoding in decodings.get(key, {}).items():
            picked = pick_baseline(candidates[key], decoding)
            if picked is None:
                continue
            baseline, alike = picked
            row.baselines[kind] = (baseline.name, baseline.outcomes)
            if not alike:
                row.undecoded_alike.add(kind)
        shown = row.baselines.get("original") or row.baselines.get("full")
        if shown is None and candidates[key]:  # no CSRAG run: the baseline alone
            best = max(candidates[key], key=lambda c: len(c.outcomes))
            shown = (best.name, best.outcomes)
        if shown is not None:
            row.baseline_name, row.outcomes["baseline"] = shown
    rank = {name: i for i, name in enumerate(SETS)}
    return sorted(rows.values(), key=lambda r: (r.context != "given", r.context,
                                                rank.get(r.dataset, len(rank)), r.dataset))


def baseline_of(row: Row, kind: str) -> dict[str, bool] | None:
    return row.baselines.get(kind, ("", None))[1]


def accuracy(outcomes: dict[str, bool] | None) -> str:
    if not outcomes:
        return "–"
    right, n = sum(outcomes.values()), len(outcomes)
    lo, hi = wilson_interval(right, n)
    return f"{100 * right / n:.1f} [{100 * lo:.0f}, {100 * hi:.0f}] (n {n})"


def aligned(a: dict[str, bool] | None, b: dict[str, bool] | None
            ) -> tuple[list[bool], list[bool]]:
    """The outcomes of the items both runs scored, in one order."""
    ids = sorted(set(a or ()) & set(b or ()))
    return [a[i] for i in ids], [b[i] for i in ids]


def paired_lists(a: list[bool], b: list[bool]) -> dict | None:
    if not a:
        return None
    result = paired_difference(a, b)
    baseline_errors = b.count(False)
    result["errors_removed"] = ((result["only_a"] - result["only_b"]) / baseline_errors
                                if baseline_errors else None)
    return result


def paired(a: dict[str, bool] | None, b: dict[str, bool] | None) -> dict | None:
    return paired_lists(*aligned(a, b))


class Pool:
    """One comparison's items pooled over sets: every set's paired items in one sample, for a
    single McNemar test of the bias's net effect (the goal itself is the mean over sets)."""

    def __init__(self) -> None:
        self.a: list[bool] = []
        self.b: list[bool] = []
        self.sets = 0

    def add(self, a: dict[str, bool] | None, b: dict[str, bool] | None) -> None:
        more_a, more_b = aligned(a, b)
        if more_a:
            self.a += more_a
            self.b += more_b
            self.sets += 1

    def line(self, label: str) -> list[str]:
        result = paired_lists(self.a, self.b)
        if result is None:
            return []
        return [(f"Pooled, {label}, {self.sets} set(s), {result['n']} items: "
                 f"{difference(result)}, errors removed {removed(result)}")]


def difference(result: dict | None) -> str:
    if result is None:
        return "–"
    lo, hi = result["difference_ci"]
    return (f"{100 * result['difference']:+.1f} [{100 * lo:+.0f}, {100 * hi:+.0f}] "
            f"({result['only_a']} / {result['only_b']}, p {result['mcnemar_p']:.2f})")


def removed(result: dict | None) -> str:
    if result is None or result["errors_removed"] is None:
        return "–"
    return f"{100 * result['errors_removed']:.0f} %"


def main_table(rows: list[Row]) -> list[str]:
    lines = [("| set | closed-book | vanilla | same-prompt baseline | CSRAG, original context "
              "| CSRAG, full method | errors removed (original / full) | full − vanilla "
              "| original − vanilla |"),
             "|---|---|---|---|---|---|---|---|---|"]
    shares: dict[str, list[float]] = {"original": [], "full": []}
    pools = {kind: Pool() for kind in shares}
    for row in rows:
        o = row.outcomes
        against_baseline = {k: paired(o.get(k), baseline_of(row, k)) for k in shares}
        for kind, pool in pools.items():
            pool.add(o.get(kind), baseline_of(row, kind))
        for kind, result in against_baseline.items():
            if result is not None and result["errors_removed"] is not None:
                shares[kind].append(result["errors_removed"])
        lines.append(
            f"| {row.dataset} | {accuracy(o.get('closed_book'))} | {accuracy(o.get('vanilla'))} "
            f"| {accuracy(o.get('baseline'))} | {accuracy(o.get('original'))} "
            f"| {accuracy(o.get('full'))} | {removed(against_baseline['original'])} / "
            f"{removed(against_baseline['full'])} "
            f"| {difference(paired(o.get('full'), o.get('vanilla')))} "
            f"| {difference(paired(o.get('original'), o.get('vanilla')))} |")
    lines.append("")
    for row in rows:
        if row.free_form:
            lines.append(f"{row.dataset}: {', '.join(sorted(row.free_form))} answered free-form "
                         "(scored by containment); the other runs chose among the options.")
        shown = row.baselines.get("original")
        full = row.baselines.get("full")
        if shown and full and full[0] != shown[0]:
            lines.append(f"{row.dataset}: the full method is compared with {full[0]} "
                         f"({accuracy(full[1])}), decoded alike.")
        for kind in sorted(row.undecoded_alike):
            lines.append(f"{row.dataset}: no baseline decoded like the {kind} run; compared "
                         f"with {row.baselines[kind][0]}.")
    for kind, values in shares.items():
        if values:
            lines.append(f"Errors removed, {kind}, mean over {len(values)} set(s): "
                         f"{100 * sum(values) / len(values):.0f} %")
    for kind, pool in pools.items():
        lines += pool.line(kind)
    return (lines + case_variant_lines(rows, "original") + case_variant_lines(rows, "full")
            + full_method_step_lines(rows))


def case_variant_lines(rows: list[Row], kind: str) -> list[str]:
    """A CSRAG run's case-variant cell (`kind`: original or full) against that run's baseline,
    on the sets whose run has it, with the default cell's errors removed on the same sets."""
    case_kind = f"{kind}_case"
    with_case = [row for row in rows if case_kind in row.outcomes]
    if not with_case:
        return []
    title = {"original": "Original context", "full": "Full method"}[kind]
    lines = ["", f"{title} with case variants (cell `{CASE_CELL}`), where the run has it:"]
    shares: dict[str, list[float]] = {case_kind: [], kind: []}
    pools = {k: Pool() for k in shares}
    for row in with_case:
        baseline = baseline_of(row, kind)
        against_baseline = {k: paired(row.outcomes[k], baseline) for k in shares}
        for k, pool in pools.items():
            pool.add(row.outcomes[k], baseline)
        for k, result in against_baseline.items():
            if result is not None and result["errors_removed"] is not None:
                shares[k].append(result["errors_removed"])
        case = against_baseline[case_kind]
        lines.append(f"- {row.dataset}: {accuracy(row.outcomes[case_kind])}, against the "
                     f"baseline {difference(case)}, errors removed {removed(case)}")
    mean = {k: f"{100 * sum(v) / len(v):.0f} %" if v else "–" for k, v in shares.items()}
    lines.append(f"Errors removed, mean over these {len(with_case)} set(s): "
                 f"{mean[case_kind]} with case variants, {mean[kind]} with the "
                 f"default cell `{DEFAULT_CELL}`")
    return (lines + pools[case_kind].line(f"{kind} with case variants")
            + pools[kind].line(f"{kind}, default cell"))


def full_method_step_lines(rows: list[Row]) -> list[str]:
    """The full method against its baseline, split at its unbiased cell into the paraphrase
    and the bias on the enhanced context, per set and pooled."""
    with_steps = [row for row in rows
                  if "full_unbiased" in row.outcomes and baseline_of(row, "full")]
    if not with_steps:
        return []
    lines = ["", (f"Full method in two steps: the paraphrase (the full run's cell `{UNBIASED}` "
                  "against the baseline), then the bias on the enhanced context (the full "
                  "method against that cell):")]
    pools = {"paraphrase": Pool(), "bias": Pool()}
    for row in with_steps:
        o = row.outcomes
        steps = {"paraphrase": (o["full_unbiased"], baseline_of(row, "full")),
                 "bias": (o["full"], o["full_unbiased"])}
        for step, (a, b) in steps.items():
            pools[step].add(a, b)
        lines.append(f"- {row.dataset}: paraphrase {difference(paired(*steps['paraphrase']))}, "
                     f"bias {difference(paired(*steps['bias']))}")
    return lines + pools["paraphrase"].line("paraphrase") + pools["bias"].line("bias")


def golden_table(rows: list[Row]) -> list[str]:
    lines = [("| set (golden context) | same-prompt baseline | CSRAG, original context "
              "| CSRAG − baseline |"), "|---|---|---|---|"]
    for row in rows:
        o = row.outcomes
        lines.append(f"| {row.dataset} | {accuracy(o.get('baseline'))} "
                     f"| {accuracy(o.get('original'))} "
                     f"| {difference(paired(o.get('original'), baseline_of(row, 'original')))} |")
    return lines


def baseline_sources(row: Row) -> str:
    label = row.dataset + ("" if row.context == "given" else f" ({row.context})")
    names = {kind: name for kind, (name, _) in sorted(row.baselines.items(), reverse=True)}
    if len(set(names.values())) <= 1:
        return f"{label}: {row.baseline_name or 'none'}"
    return f"{label}: " + ", ".join(f"{name} ({kind})" for kind, name in names.items())


def table_text(folders: list[str]) -> str:
    """The main table of the runs under `folders` (see `table`)."""
    rows = collect(folders)
    if not rows:
        raise SystemExit("no closed_book, vanilla, cot_json_scored or csrag_json_scored runs found")
    given = [r for r in rows if r.context == "given"]
    golden = [r for r in rows if r.context == "golden"]
    lines = main_table(given) if given else []
    if golden:
        lines += ([""] if lines else []) + golden_table(golden)
    others = [r for r in rows if r.context not in ("given", "golden")]
    if others:
        lines += ["", "Left out (other context modes): "
                  + ", ".join(f"{r.dataset} ({r.context})" for r in others)]
    lines += ["", "Same-prompt baselines: " + "; ".join(baseline_sources(r) for r in rows)]
    return "\n".join(lines)


def table(args: argparse.Namespace) -> None:
    """CSRAG's main table in the scored JSON mode, one row per dataset, from the run
    directories under the given folders (e.g. `results/csrag/json-scored`). Each run's role is
    read from its manifest, not its name:

    - closed_book, vanilla: runs of those methods;
    - CSRAG, original context: csrag_json_scored with `csrag.enhance_context = false`;
    - CSRAG, full method: csrag_json_scored with the enhanced context;
    - same-prompt baseline, for each CSRAG run: among the baselines decoded alike (the same
      `llm.lookup_tokens`: prompt-lookup drafts change some greedy Reasons), the unbiased cell
      `a=0 b=0` of the original-context run made with `csrag.ablation_grid` (the same Reason,
      scored without the bias), else the cot_json_scored run with the most items; when none is
      decoded alike, the same choice among all, flagged below the table. The baseline column
      shows the original-context run's baseline (the full method's where there is none);
    - case variants: the cell `a=-1 b=3 +case` of each CSRAG run (original context and full
      method), where it has that cell (runs made before the cell was added do not), reported
      below the table beside the default cell, against the same baseline.

    Below the table, each comparison is also pooled over the sets (every set's paired items in
    one sample, one McNemar test): the goal is the mean over sets, the pool asks whether the
    bias's net effect is there at all. Where the full method's run has the grid, its effect is
    split into its two steps: the paraphrase (its unbiased cell against its baseline) and the
    bias on the enhanced context (the full method against that cell).

    Runs with the item's golden context (`--context golden`, the non-conflict check) get a
    table of their own. Every comparison is paired over the items both runs scored; "errors
    removed" is the share of the baseline's errors there that CSRAG gets right, net of those
    it newly gets wrong."""
    print(table_text(args.folders))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    recipe = argparse.ArgumentParser(add_help=False)
    recipe.add_argument("--model", default="default")
    recipe.add_argument("--sets", nargs="+", default=list(SETS))
    recipe.add_argument("--faithrag", default=str(Path(sys.executable).with_name("faithrag")),
                        help="the faithrag executable (default: the one beside this Python)")

    def command(name: str, handler, summary: str, *parents: argparse.ArgumentParser):
        p = sub.add_parser(name, parents=list(parents), help=summary,
                           description=inspect.cleandoc(handler.__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(handler=handler)
        return p

    p = command("baselines", baselines, "the baselines on the six sets", recipe)
    p.add_argument("--limit", type=int, default=100, help="items per run")
    p.add_argument("--threads", type=int, default=2,
                   help="1 when something else shares the CPU (llama.cpp collapses otherwise)")
    p.add_argument("--out", default="runs/baselines")
    p.add_argument("--methods", nargs="+",
                   default=["closed_book", "vanilla", "cot_json", "choice_scoring"])
    p = command("run", run, "CSRAG's measurements, then their reports", recipe)
    p.add_argument("part", nargs="?", default="all",
                   choices=("main", "golden", "ablations", "grid", "table", "all"))
    p.add_argument("--limit", type=int, default=200, help="items per run")
    p.add_argument("--ablation-limit", type=int, default=100, help="items per ablation run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--workers", type=int, default=1, help="items at once, one model copy each "
                   "(two items on one thread each is the fastest arrangement on two cores)")
    p.add_argument("--out", default="runs/csrag")
    p.add_argument("--base-out", default=None,
                   help="where main's baseline runs go (default: OUT/main)")
    p.add_argument("--baseline-methods", nargs="+",
                   default=["closed_book", "vanilla", "cot_json", "cot_json_scored"])
    p.add_argument("--methods", nargs="+", default=["csrag", "csrag_json_scored", "csrag_choices"])
    p.add_argument("--csrag-args", default="--set llm.lookup_tokens=10",
                   help="eval arguments of every CSRAG run, one string")
    p.add_argument("--golden", nargs="+", default=["kre_musique", "kre_squad"],
                   help="the sets with golden (non-conflict) contexts")
    p = command("table", table, "CSRAG's main table (no model)")
    p.add_argument("folders", nargs="+", help="run directories or folders holding them")
    args = parser.parse_args(argv)
    args.handler(args)


if __name__ == "__main__":
    main()

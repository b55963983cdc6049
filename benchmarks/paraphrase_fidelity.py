"""How faithful CSRAG's paraphrases are, by surface checks that need no model. For each item of a
dataset whose passages have rewrites in the paraphrase cache: whether the token cap cut a
rewrite, whether a rewrite drops the item's context answer (when the passage states it), drops a
number of the passage, or adds a number or a capitalised word the passage does not have, and the
rewrites' length against the passage.

With `--enhanced RUN --original RUN` the items are also split by how the enhanced context without
the bias (cell a=0 b=0 of a csrag run made with `csrag.ablation_grid`) fared against a run on the
original context: lost, gained, unchanged. A check that flags the lost items more often than the
unchanged ones points at the rewrites as the cause of the loss. Either run may be written
`RUN@CELL` to read one ablation cell: the cleanest original-context run is the same csrag run
with `csrag.enhance_context=false`, read at its own cell a=0 b=0 (same decoding settings).

    python benchmarks/paraphrase_fidelity.py kre_musique --limit 100 \
      --enhanced results/csrag/json-scored/kre_musique-csrag_json_scored \
      --original "results/csrag/json-scored/kre_musique-csrag_json_scored-original@a=0 b=0"

The cache is the one `faithrag eval --method csrag*` or `faithrag index --paraphrase` filled on
this machine ($FAITHRAG_CACHE/csrag/paraphrases); items without an entry are counted apart.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from statistics import median

from faithrag.config import CSRAGConfig, cache_dir
from faithrag.eval.datasets import QAItem, load_dataset
from faithrag.eval.report import run_outcomes
from faithrag.methods.csrag.cache import JsonCache
from faithrag.methods.csrag.paraphrase import paraphrase_key
from faithrag.methods.csrag.token_sets import stopwords

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*")
CHECKS = ("cut", "answer dropped", "number dropped", "number added", "name added")


@dataclass
class Fidelity:
    flags: dict[str, bool]
    length_ratio: float  # rewrites' mean length over the passages' length, in characters


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def _numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(text))


def _names(text: str) -> set[str]:
    """Capitalised words other than stopwords ("The", "It"), which start sentences anyway."""
    return {w for w in _CAPITALISED.findall(text) if w.lower() not in stopwords()}


def check_rewrites(passage: str, rewrites: list[str], cut: bool, answer: str | None) -> dict:
    """Which of CHECKS one passage's rewrites fail."""
    words = set(_normal(passage).split())
    answer_stated = bool(answer) and _normal(answer) in _normal(passage)
    return {
        "cut": cut,
        "answer dropped": answer_stated and any(_normal(answer) not in _normal(r)
                                                for r in rewrites),
        "number dropped": any(_numbers(passage) - _numbers(r) for r in rewrites),
        "number added": any(_numbers(r) - _numbers(passage) for r in rewrites),
        "name added": any(w.lower() not in words and w not in passage
                          for r in rewrites for w in _names(r)),
    }


def item_fidelity(item: QAItem, cache: JsonCache, model: str, cap: int) -> Fidelity | None:
    """The checks over an item's passages (a flag is set when any passage sets it), or None when
    no passage has cached rewrites."""
    flags, lengths = dict.fromkeys(CHECKS, False), []
    for passage in item.passages():
        entry = cache.get(paraphrase_key(model, cap, passage.text))
        if not entry or not entry.get("texts"):
            continue
        rewrites = [str(t) for t in entry["texts"]]
        found = check_rewrites(passage.text, rewrites, bool(entry.get("truncated")), item.answer)
        flags = {k: flags[k] or found[k] for k in CHECKS}
        lengths += [len(r) / max(len(passage.text), 1) for r in rewrites]
    return Fidelity(flags, sum(lengths) / len(lengths)) if lengths else None


def _outcomes(run_arg: str, default_cell: str | None) -> dict[str, bool]:
    try:
        return run_outcomes(run_arg, default_cell)[1]
    except ValueError as err:
        raise SystemExit(str(err)) from None


def groups(enhanced: str, original: str) -> dict[str, str]:
    """Item id -> lost / gained / unchanged, the enhanced context's unbiased cell (or the cell
    `enhanced` names) against the original-context run, over the items both scored."""
    ours, theirs = _outcomes(enhanced, "a=0 b=0"), _outcomes(original, None)
    return {i: ("lost" if theirs[i] and not ours[i] else "gained" if ours[i] and not theirs[i]
                else "unchanged") for i in ours.keys() & theirs.keys()}


def table(fidelity: dict[str, Fidelity], group_of: dict[str, str] | None) -> list[str]:
    rows = [("all with rewrites", list(fidelity.values()))]
    if group_of is not None:
        for name in ("lost", "gained", "unchanged"):
            rows.append((name, [f for i, f in fidelity.items() if group_of.get(i) == name]))
    lines = ["| items | n | " + " | ".join(CHECKS) + " | median length ratio |",
             "|---|---:|" + "---:|" * len(CHECKS) + "---:|"]
    for name, found in rows:
        if not found:
            lines.append(f"| {name} | 0 |" + " |" * (len(CHECKS) + 1))
            continue
        counts = [sum(f.flags[c] for f in found) for c in CHECKS]
        lines.append(f"| {name} | {len(found)} | " + " | ".join(map(str, counts)) +
                     f" | {median(f.length_ratio for f in found):.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--limit", type=int, default=None, help="first N items, as eval takes them")
    parser.add_argument("--data", default=None, help="data root (default ../shared/data)")
    parser.add_argument("--model", default="LlamaCppLLM:default",
                        help="the model identity the cache is keyed on (backend class:model)")
    parser.add_argument("--cap", type=int, default=CSRAGConfig().paraphrase_tokens,
                        help="csrag.paraphrase_tokens of the run that filled the cache")
    parser.add_argument("--enhanced", help="csrag run with csrag.ablation_grid [@CELL]")
    parser.add_argument("--original", help="run on the original context [@CELL]")
    args = parser.parse_args()
    if (args.enhanced is None) != (args.original is None):
        parser.error("--enhanced and --original go together")

    items = load_dataset(args.dataset, root=args.data)[:args.limit]
    cache = JsonCache(cache_dir() / "csrag" / "paraphrases")
    fidelity = {item.id: f for item in items
                if (f := item_fidelity(item, cache, args.model, args.cap)) is not None}
    group_of = groups(args.enhanced, args.original) if args.enhanced else None
    print(f"### {args.dataset}: {len(fidelity)} of {len(items)} items have cached rewrites\n")
    print("\n".join(table(fidelity, group_of)))


if __name__ == "__main__":
    main()

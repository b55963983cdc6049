"""The mixed suite's figures, from its records (faithrag/eval/suite.py).

Per slice, per slice kind (conflict, hard negative, clean) and over all items, on the items
both ways answered (a way's error is left out with its item and counted): the share correct
of each way with 95 % Wilson intervals, the paired difference pipeline - plain (seeded
bootstrap interval), items only one way got right and the exact McNemar p; the same for
`informed`; attack success of each way on the hostile slices; the items whose answer the
pipeline rewrote as surfaced readings, and those whose answer it flagged (kept, naming the
passages that disagree): on clean and hard-negative items, false alarms the user reads;
unreadable answers per way; and the time ratio, the pipeline's wall seconds over plain RAG's on
the same items. A record without `flagged` (written before the `flag` policy) was not flagged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithrag.eval.stats import paired_difference, wilson_interval
from faithrag.eval.suite_slices import SLICES
from faithrag.types import PARSE_OK

GROUPS = (("conflict", "conflict slices"), ("hard_negative", "hard-negative slices"),
          ("clean", "clean slices"))
OVERALL = "all items"


def _share(values: Sequence[bool]) -> dict[str, Any]:
    hits, n = sum(values), len(values)
    return {"k": hits, "n": n, "rate": hits / n if n else None,
            "ci": list(wilson_interval(hits, n)) if n else None}


def _row(name: str, pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    plain = [p for p, _ in pairs]
    piped = [q for _, q in pairs]
    row: dict[str, Any] = {"name": name, "n": len(pairs)}
    if not pairs:
        return row
    for metric in ("correct", "informed"):
        row[metric] = {"plain": _share([r[metric] for r in plain]),
                       "pipeline": _share([r[metric] for r in piped]),
                       "paired": paired_difference([r[metric] for r in piped],
                                                   [r[metric] for r in plain])}
    attacked = [(p, q) for p, q in pairs if p.get("attacked") is not None]
    if attacked:
        row["attacked"] = {"plain": _share([p["attacked"] for p, _ in attacked]),
                           "pipeline": _share([q["attacked"] for _, q in attacked])}
    row["surfaced"] = _share([q["surfaced"] for q in piped])
    row["flagged"] = _share([q.get("flagged", False) for q in piped])
    row["unreadable"] = {way: sum(r["parse_status"] != PARSE_OK for r in records)
                         for way, records in (("plain", plain), ("pipeline", piped))}
    plain_seconds = sum(r["seconds"] for r in plain)
    row["seconds"] = {"plain": round(plain_seconds, 2),
                      "pipeline": round(sum(r["seconds"] for r in piped), 2)}
    row["time_ratio"] = (row["seconds"]["pipeline"] / plain_seconds if plain_seconds else None)
    return row


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rows per slice (suite order), per kind and overall; `errors` counts items left out."""
    by_item: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for record in records:
        by_item.setdefault((record["slice"], record["item"]), {})[record["way"]] = record
    pairs: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    errors = 0
    for (slice_name, _), ways in by_item.items():
        plain, piped = ways.get("plain"), ways.get("pipeline")
        if plain is None or piped is None:
            continue  # the other way has not run yet
        if "error" in plain or "error" in piped:
            errors += 1
            continue
        pairs.setdefault(slice_name, []).append((plain, piped))
    slices = [_row(name, pairs[name]) for name in SLICES if name in pairs]
    kinds = [_row(label, [pair for name in pairs if SLICES[name].kind == kind
                          for pair in pairs[name]])
             for kind, label in GROUPS if any(SLICES[n].kind == kind for n in pairs)]
    overall = _row(OVERALL, [pair for name in pairs for pair in pairs[name]])
    return {"slices": slices, "kinds": kinds, "overall": overall, "errors": errors}


def _pct(share: dict[str, Any]) -> str:
    low, high = share["ci"]
    return f"{100 * share['rate']:.0f} [{100 * low:.0f}, {100 * high:.0f}]"


def _paired(paired: dict[str, Any]) -> str:
    low, high = paired["difference_ci"]
    return (f"{100 * paired['difference']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}] "
            f"({paired['only_b']} / {paired['only_a']}, p {paired['mcnemar_p']:.2g})")


def render_markdown(summary: dict[str, Any]) -> str:
    """The summary as one markdown table, slices first, then the kinds and all items."""
    lines = [("| slice | kind | n | correct %: plain → pipeline | pipeline − plain, points "
             "(plain only / pipeline only, McNemar p) | informed %: plain → pipeline "
             "| attack success %: plain → pipeline | answers surfaced / flagged | × time |"),
             "|---|---|---:|---|---|---|---|---|---:|"]
    rows = [*summary["slices"], *summary["kinds"], summary["overall"]]
    for row in rows:
        if not row["n"]:
            continue
        kind = SLICES[row["name"]].kind.replace("_", " ") if row["name"] in SLICES else ""
        name = row["name"] if row["name"] in SLICES else f"**{row['name']}**"
        attack = (f"{_pct(row['attacked']['plain'])} → {_pct(row['attacked']['pipeline'])}"
                  if "attacked" in row else "")
        surfaced = f"{row['surfaced']['k']} / {row['flagged']['k']} of {row['n']}"
        ratio = f"{row['time_ratio']:.2f}" if row["time_ratio"] is not None else ""
        lines.append(
            f"| {name} | {kind} | {row['n']} | {_pct(row['correct']['plain'])} → "
            f"{_pct(row['correct']['pipeline'])} | {_paired(row['correct']['paired'])} | "
            f"{_pct(row['informed']['plain'])} → {_pct(row['informed']['pipeline'])} | "
            f"{attack} | {surfaced} | {ratio} |")
    if summary["errors"]:
        lines.append(f"\n{summary['errors']} item(s) left out: a way ended in an error "
                     "(re-run the same command to retry them).")
    return "\n".join(lines) + "\n"

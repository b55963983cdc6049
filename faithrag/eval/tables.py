"""Markdown cells and tables of the evaluation reports (faithrag.eval.report,
faithrag.eval.paired_report, faithrag.eval.cells_report): percentages with their intervals,
paired differences in points, and pipe tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithrag.eval.stats import wilson_interval


def ordered(values) -> list:
    return list(dict.fromkeys(values))


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def ci(interval: Sequence[float] | None) -> str:
    return "" if interval is None else f" [{pct(interval[0])}, {pct(interval[1])}]"


def num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(map(cell, header)) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return lines


def wilson(successes: int, n: int) -> str:
    return f"{pct(successes / n)}{ci(wilson_interval(successes, n))}"


def points(d: dict[str, Any]) -> str:
    lo, hi = d["difference_ci"]
    return f"{100 * d['difference']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"

"""PNG plots of evaluation figures, drawn with matplotlib.

The functions take plain figures (no run directories), so that a report or a benchmark script
decides what to plot and these only draw it:

- ``plot_accuracy(cells, path)``: grouped bars of accuracy by series label per dataset, with the
  intervals as error bars;
- ``plot_distractors(points, path)``: accuracy against the number of injected distractors, one
  line per series, one panel per dataset.

matplotlib is imported when a plot is drawn, never when this module is imported: without
matplotlib, importing works, and drawing, or `require_plots` before it, raises
MissingExtraError.

Example::

    from faithrag.eval.plots import plot_accuracy

    plot_accuracy({("vanilla", "nq"): (0.42, (0.37, 0.47)),
                   ("csrag", "nq"): (0.55, (0.50, 0.60))}, "accuracy.png")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from faithrag.errors import MissingExtraError, require_modules

# (series label, dataset) -> (accuracy, (low, high))
AccuracyCells = Mapping[tuple[str, str], tuple[float, Sequence[float]]]
# dataset -> series label -> [(injected distractors, accuracy, (low, high)), ...]
DistractorPoints = Mapping[str, Mapping[str, list[tuple[float, float, Sequence[float]]]]]


def require_plots() -> None:
    """MissingExtraError when matplotlib is not installed (checked, not imported), for a caller
    that should say so before it writes anything."""
    require_modules("Plots", "plots", ("matplotlib",))


def _figure(width: float, height: float):
    try:
        from matplotlib.figure import Figure  # lazy: only plots need matplotlib
    except ImportError as exc:
        raise MissingExtraError("Plots", "plots") from exc

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _error_bars(values: list[float], intervals: list[Sequence[float]]) -> list[list[float]]:
    return [[max(0.0, v - lo) for v, (lo, _) in zip(values, intervals)],
            [max(0.0, hi - v) for v, (_, hi) in zip(values, intervals)]]


def plot_accuracy(cells: AccuracyCells, path: str | Path) -> None:
    """Write grouped bars of accuracy (y from 0 to 1) to ``path``: one group per dataset, one
    bar per series label, in first-seen order. ValueError when ``cells`` is empty."""
    if not cells:
        raise ValueError("no accuracy to plot")
    datasets = list(dict.fromkeys(d for _, d in cells))
    labels = list(dict.fromkeys(label for label, _ in cells))
    fig = _figure(max(6.0, 1.2 * len(datasets) * max(1, len(labels)) ** 0.5 + 2), 4.5)
    ax = fig.subplots()
    width = 0.8 / len(labels)
    for i, label in enumerate(labels):
        xs, ys, cis = [], [], []
        for j, dataset in enumerate(datasets):
            cell = cells.get((label, dataset))
            if cell is not None:
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(cell[0])
                cis.append(cell[1])
        ax.bar(xs, ys, width=width, label=label, yerr=_error_bars(ys, cis), capsize=3)
    ax.set_xticks(range(len(datasets)), datasets, rotation=20, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy (95% Wilson CI)")
    ax.set_title("Accuracy by method")
    ax.legend(fontsize="small")
    fig.savefig(path)


def plot_distractors(points: DistractorPoints, path: str | Path) -> None:
    """Write accuracy against injected distractors to ``path``: one panel per dataset, one line
    per series, points sorted by the number of distractors. ValueError when ``points`` is
    empty."""
    if not points:
        raise ValueError("no distractor sweep to plot")
    fig = _figure(4.5 * len(points) + 1, 4.0)
    from matplotlib.ticker import MaxNLocator

    axes = fig.subplots(1, len(points), squeeze=False)[0]
    for ax, (dataset, series) in zip(axes, points.items()):
        for name, unsorted in series.items():
            pts = sorted(unsorted, key=lambda p: p[0])
            xs, ys, cis = [p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts]
            ax.errorbar(xs, ys, yerr=_error_bars(ys, cis), marker="o", capsize=3, label=name)
        ax.set_title(dataset)
        ax.set_xlabel("injected distractors")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, 1)
        ax.legend(fontsize="small")
    axes[0].set_ylabel("accuracy (95% Wilson CI)")
    fig.savefig(path)

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from faithrag.eval.plots import plot_accuracy, plot_distractors

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def image_size(path: Path) -> tuple[int, int]:
    from matplotlib.image import imread

    height, width, _ = imread(path).shape
    return width, height


def test_accuracy_bars_are_a_png_sized_by_the_figure(tmp_path: Path) -> None:
    path = tmp_path / "accuracy.png"
    plot_accuracy({("vanilla", "nq"): (0.4, (0.3, 0.5)), ("csrag", "nq"): (0.6, (0.5, 0.7)),
                   ("vanilla", "kre"): (0.2, (0.1, 0.35))}, path)
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert image_size(path) == (600, 450)  # 6 x 4.5 inches at 100 dpi


def test_distractor_plot_has_one_panel_per_dataset(tmp_path: Path) -> None:
    points = {"nq": {"vanilla": [(4, 0.3, (0.2, 0.4)), (0, 0.5, (0.4, 0.6))]},
              "kre": {"vanilla": [(0, 0.5, (0.4, 0.6))], "cfrag": [(16, 0.6, (0.5, 0.7))]}}
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    plot_distractors({"nq": points["nq"]}, one)
    plot_distractors(points, two)
    assert image_size(one) == (550, 400) and image_size(two) == (1000, 400)
    assert points["nq"]["vanilla"][0][0] == 4  # the caller's points are left as they were


def test_plots_import_matplotlib_only_when_drawing(tmp_path: Path) -> None:
    """Without matplotlib the report modules still import; drawing names the extra."""
    script = f"""
import sys
sys.modules["matplotlib"] = None  # as if it were not installed
import faithrag.eval.report
from faithrag.errors import MissingExtraError
from faithrag.eval.plots import plot_accuracy
try:
    plot_accuracy({{("m", "d"): (0.5, (0.4, 0.6))}}, {str(tmp_path / "a.png")!r})
except MissingExtraError as exc:
    print("MissingExtraError", exc.hint)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "MissingExtraError pip install 'faithrag[plots]'"
    assert not (tmp_path / "a.png").exists()


@pytest.mark.parametrize("plot", [plot_accuracy, plot_distractors])
def test_nothing_to_plot_is_refused(plot, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="to plot"):
        plot({}, tmp_path / "empty.png")

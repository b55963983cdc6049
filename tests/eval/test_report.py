from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_doubles import make_run, qa_items, record, write_set

from faithrag.cli import main
from faithrag.errors import DataError
from faithrag.eval.metrics import aggregate
from faithrag.eval.report import (
    Run,
    distractor_series,
    find_run_dirs,
    item_slice,
    load_run,
    paired_report,
    report,
)
from faithrag.eval.stats import mcnemar_exact_p, wilson_interval

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    ids = [f"q{i}" for i in range(20)]
    # vanilla: right on the first 4 only; csrag: right on the first 14 (10 more, none fewer)
    vanilla = [record(i, n < 4) for n, i in enumerate(ids)]
    csrag = [record(i, n < 14) for n, i in enumerate(ids[:18])]
    csrag += [record("q18", None, "failed"), record("q19", None, "error")]
    rank = [record(f"r{i}", None, metrics={"ndcg@1": 1.0 if i % 2 else 0.0, "contrary@1": 0.5})
            for i in range(4)]
    return [
        make_run(tmp_path / "runs", "vanilla_d", "d", "vanilla", vanilla),
        make_run(tmp_path / "runs", "csrag_d", "d", "csrag", csrag,
                 tail='{"id": "q5", "correct": tr'),  # a line cut by a crash
        make_run(tmp_path / "runs", "crossval_r", "r_rank", "crossval", rank),
        *[make_run(tmp_path / "runs", f"sweep{k}", "d", "vanilla",
                   [record(i, n < 10 - 2 * k) for n, i in enumerate(ids)],
                   sweep={"distractors": k}) for k in (0, 2, 4)],
    ]


def test_report_table_summary_and_plots(runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    files = report(runs, out, compare=True)
    assert files.table == out / "report.md" and files.summary == out / "summary.json"
    assert {p.name for p in files.plots} == {"accuracy.png", "distractors.png"}
    for plot in files.plots:
        data = plot.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 5000
        from matplotlib.image import imread
        height, width, _ = imread(plot).shape
        assert height > 200 and width > 300

    summary = json.loads(files.summary.read_text())
    by_label = {(r["dataset"], r["label"]): r for r in summary["runs"]}
    assert set(by_label) == {("d", "vanilla"), ("d", "csrag"), ("r_rank", "crossval"),
                             ("d", "vanilla [distractors=0]"), ("d", "vanilla [distractors=2]"),
                             ("d", "vanilla [distractors=4]")}
    csrag = by_label[("d", "csrag")]
    agg = csrag["aggregate"]
    assert (agg["n"], agg["n_scored"], agg["correct"]) == (20, 20, 14)
    assert agg["accuracy"] == 0.7
    assert agg["accuracy_ci"] == pytest.approx(list(wilson_interval(14, 20)))
    assert (agg["parse_failures"], agg["failed_items"]) == (1, 1)
    assert csrag["skipped_lines"][0]["line"] == 21
    assert by_label[("d", "vanilla")]["aggregate"]["accuracy"] == 0.2
    rank = by_label[("r_rank", "crossval")]["aggregate"]
    assert rank["accuracy"] is None and rank["metrics"]["ndcg@1"]["mean"] == 0.5
    assert summary["files"] == {"table": "report.md",
                                "plots": ["accuracy.png", "distractors.png"]}

    pair = next(c for c in summary["comparisons"]
                if {c["a"], c["b"]} == {"vanilla", "csrag"})
    assert pair["n"] == 20
    sign = 1 if pair["a"] == "vanilla" else -1
    assert pair["difference"] == pytest.approx(sign * (0.2 - 0.7))
    assert {pair["only_a"], pair["only_b"]} == {0, 10}
    assert pair["mcnemar_p"] == pytest.approx(mcnemar_exact_p(10, 0))
    low, high = pair["difference_ci"]
    assert low <= pair["difference"] <= high

    table = files.table.read_text()
    assert "| method | d | r_rank |" in table
    assert "| crossval |  | – |" in table  # a ranking run has no accuracy
    assert "70.0 [48.1, 85.5] (n=20)" in table  # Wilson 14/20
    assert "| d | csrag | tiny | 20 | 70.0 [48.1, 85.5] |" in table
    assert "ndcg@1" in table and "contrary@1" in table and "0.500" in table
    assert "## Paired comparisons" in table
    assert ("-50.0 [" if pair["a"] == "vanilla" else "+50.0 [") in table
    assert "skipped 1 malformed line(s)" in table
    assert "![accuracy](accuracy.png)" in table


def test_report_without_matplotlib_says_so_before_writing_anything(runs: list[Path],
                                                                  tmp_path: Path,
                                                                  monkeypatch) -> None:
    import sys

    from faithrag.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    with pytest.raises(MissingExtraError, match="Plots needs the optional extra 'plots'"):
        report(runs, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_report_without_compare_or_sweep(runs: list[Path], tmp_path: Path) -> None:
    files = report(runs[:2], tmp_path / "plain")
    assert [p.name for p in files.plots] == ["accuracy.png"]
    assert "Paired comparisons" not in files.table.read_text()
    assert json.loads(files.summary.read_text())["comparisons"] == []


def test_labels_disambiguate_models_and_duplicates_keep_last(tmp_path: Path) -> None:
    first = make_run(tmp_path, "a", "d", "vanilla", [record("x", False), record("x", True)],
                     model="tiny")
    second = make_run(tmp_path, "b", "d", "vanilla", [record("x", False)], model="fast")
    run = load_run(first)
    assert run.duplicate_records == 1 and run.records[0]["correct"] is True
    files = report([first, second], tmp_path / "out")
    labels = [r["label"] for r in json.loads(files.summary.read_text())["runs"]]
    assert labels == ["vanilla (tiny)", "vanilla (fast)"]
    assert "1 repeated id(s)" in files.table.read_text()


def test_labels_of_same_named_runs_in_different_folders_show_the_folder(tmp_path: Path
                                                                        ) -> None:
    runs = [make_run(tmp_path / folder, "cfrag-d16", "d", "cfrag", [record("x", ok)])
            for folder, ok in (("main", False), ("extracted", True))]
    files = report(runs, tmp_path / "out", compare=True)
    summary = json.loads(files.summary.read_text())
    assert [r["label"] for r in summary["runs"]] == ["cfrag (main/cfrag-d16)",
                                                     "cfrag (extracted/cfrag-d16)"]
    assert [(c["a"], c["b"]) for c in summary["comparisons"]] == [
        ("cfrag (main/cfrag-d16)", "cfrag (extracted/cfrag-d16)")]


def test_labels_name_the_pipeline_and_only_the_sweep_settings_that_differ(tmp_path: Path
                                                                         ) -> None:
    def hostile(name: str, retrieval: str, verify: str | None) -> Path:
        return make_run(tmp_path, name, "h", "vanilla", [record("x", True)], verify=verify,
                        sweep={"setting": "kre", "retrieval": retrieval, "poison_count": None})
    runs = [hostile("a", "clean", None), hostile("b", "hostile", None),
            hostile("c", "hostile", "antisyco")]
    files = report(runs, tmp_path / "out")
    labels = [r["label"] for r in json.loads(files.summary.read_text())["runs"]]
    assert labels == ["vanilla [retrieval=clean]", "vanilla [retrieval=hostile]",
                      "vanilla + antisyco [retrieval=hostile]"]


def test_labels_name_every_stage_of_the_kinds_table(tmp_path: Path) -> None:
    """A run's label names each stage it had, of every kind (registry.KINDS); an older
    manifest without a kind's key (detect) has it read from its configuration."""
    detected = make_run(tmp_path, "a", "d", "vanilla", [record("x", True)])
    manifest = json.loads((detected / "manifest.json").read_text())
    manifest["config"] = {"pipeline": {"method": "vanilla", "detect": "conflicts"}}
    (detected / "manifest.json").write_text(json.dumps(manifest))
    reranked = make_run(tmp_path, "b", "d", "vanilla", [record("x", True)])
    manifest = json.loads((reranked / "manifest.json").read_text())
    manifest.update(rerank="crossval", detect="conflicts")
    (reranked / "manifest.json").write_text(json.dumps(manifest))
    files = report([detected, reranked], tmp_path / "out")
    labels = [r["label"] for r in json.loads(files.summary.read_text())["runs"]]
    assert labels == ["vanilla + conflicts", "vanilla + crossval + conflicts"]


def test_labels_name_the_ablation_switch(tmp_path: Path) -> None:
    def cfrag(name: str, config: dict) -> Path:
        run = make_run(tmp_path, name, "p", "cfrag", [record("x", True)], sweep={"distractors": 16})
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["config"] = {"cfrag": config, "antisyco": {"kb": f"/runs/{name}/kb"}}
        (run / "manifest.json").write_text(json.dumps(manifest))
        return run
    runs = [cfrag("full", {}), cfrag("no_causal", {"causal_scoring": False})]
    files = report(runs, tmp_path / "out")
    labels = [r["label"] for r in json.loads(files.summary.read_text())["runs"]]
    assert labels == ["cfrag", "cfrag [cfrag.causal_scoring=False]"]


def test_each_ablation_is_its_own_line_in_the_distractor_plot(tmp_path: Path) -> None:
    def cfrag(name: str, count: int, config: dict) -> Run:
        run = make_run(tmp_path, name, "p", "cfrag", [record("x", True)],
                       sweep={"distractors": count})
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["config"] = {"cfrag": config}
        (run / "manifest.json").write_text(json.dumps(manifest))
        return load_run(run)
    runs = [cfrag("d0", 0, {}), cfrag("d16", 16, {}),
            cfrag("no_causal", 16, {"causal_scoring": False})]
    series = distractor_series(runs, [aggregate(r.records) for r in runs])["p"]
    assert {name: [p[0] for p in pts] for name, pts in series.items()} == {
        "cfrag (tiny)": [0, 16], "cfrag [cfrag.causal_scoring=False] (tiny)": [16]}


def test_bad_run_directories(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        load_run(tmp_path)
    assert "manifest.json" in info.value.hint
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text(json.dumps({"method": "m"}))
    (bad / "results.jsonl").write_text("")
    with pytest.raises(DataError, match="dataset"):
        load_run(bad)
    with pytest.raises(DataError):
        report([], tmp_path / "out")
    with pytest.raises(DataError):
        find_run_dirs([tmp_path / "empty_parent"])


def test_find_run_dirs_and_cli(runs: list[Path], tmp_path: Path, capsys) -> None:
    parent = runs[0].parent
    assert find_run_dirs([parent]) == sorted(runs)
    assert find_run_dirs([runs[0]]) == [runs[0]]
    out = tmp_path / "cli"
    assert main(["report", str(parent), "--out", str(out), "--compare"]) == 0
    assert (out / "report.md").is_file() and (out / "summary.json").is_file()
    assert str(out / "report.md") in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nothing"), "--out", str(out)]) == 2
    assert "no run directory" in capsys.readouterr().err


def test_common_cuts_each_dataset_to_the_items_all_its_runs_hold(runs: list[Path],
                                                                  tmp_path: Path) -> None:
    short = make_run(tmp_path / "more", "short_d", "d", "cfrag",
                     [record(f"q{i}", True) for i in (0, 1, 2, 5)])
    files = report([runs[0], short, runs[2]], tmp_path / "out", common=True)
    summary = json.loads(files.summary.read_text())
    assert summary["common_items"] is True
    by_method = {r["method"]: r["aggregate"] for r in summary["runs"]}
    # vanilla is right on q0-q3 only: 3 of the 4 shared items; the ranking dataset is untouched
    assert by_method["vanilla"]["n_scored"] == 4 and by_method["vanilla"]["accuracy"] == 0.75
    assert by_method["cfrag"]["n_scored"] == 4
    assert by_method["crossval"]["n"] == 4
    assert "cut to the items all runs on its dataset hold" in files.table.read_text()
    plain = json.loads(report([runs[0], short], tmp_path / "plain").summary.read_text())
    assert [r["aggregate"]["n_scored"] for r in plain["runs"]] == [20, 4]


def test_labels_name_the_offset_when_runs_cover_other_slices_of_a_set(tmp_path: Path) -> None:
    runs = [make_run(tmp_path, name, "r", "crossval", [record(f"{name}1", True)])
            for name in ("first", "later", "older")]
    for run, offset in zip(runs, (0, 500, None)):  # None: a manifest from before --offset
        manifest = json.loads((run / "manifest.json").read_text())
        if offset is not None:
            manifest["offset"] = offset
        (run / "manifest.json").write_text(json.dumps(manifest))
    labels = [r["label"] for r in json.loads(report(runs[:2], tmp_path / "two").summary
                                             .read_text())["runs"]]
    assert labels == ["crossval [offset=0]", "crossval [offset=500]"]
    same = report([runs[0], runs[2]], tmp_path / "same")  # 0 and absent are the same slice
    assert "offset" not in same.table.read_text()


# ---------------------------------------------------------------- paired comparisons

# ---------------------------------------------------------------- ablation cells

def test_cli_paired_and_cells(tmp_path: Path, capsys) -> None:
    data = write_set(tmp_path / "data", "d", qa_items(2))
    a = make_run(tmp_path, "a", "d", "m", [record("q0", True), record("q1", True)])
    b = make_run(tmp_path, "b", "d", "m", [record("q0", False), record("q1", True)])
    assert main(["report", str(a), str(b), "--paired", "--slices", "0:1",
                 "--data-dir", str(data), "--out", str(tmp_path / "never")]) == 0
    assert f"| {b} | 1–1 | 1 |" in capsys.readouterr().out
    assert not (tmp_path / "never").exists()
    assert main(["report", str(a), "--cells"]) == 2
    assert "has no scored ablation cells" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["report", str(a), str(b), "--slices", "0:1"])  # --slices needs --paired
    with pytest.raises(SystemExit):
        main(["report", str(a), str(b), "--paired", "--slices", "2:1"])


# ---------------------------------------------------------------- grouped by a field

def test_report_and_paired_comparison_by_a_field(tmp_path: Path) -> None:
    a = make_run(tmp_path, "a", "d", "cfrag", [
        record("q0", True), record("q1", True),
        record("q2", None, "failed")])  # a parse failure counts as wrong
    b = make_run(tmp_path, "b", "d", "vanilla", [record("q0", False), record("q1", True),
                                                 record("q2", True)])
    files = report([a, b], tmp_path / "out", by="parse_status")
    table = files.table.read_text()
    assert "## Accuracy by parse_status" in table
    assert "| d | cfrag | ok | 2 | 100.0 [34.2, 100.0] |" in table
    assert "| d | cfrag | failed | 1 | 0.0 [0.0, 79.3] |" in table
    groups = json.loads(files.summary.read_text())["by"]
    assert groups["field"] == "parse_status" and len(groups["groups"]) == 3

    paired = paired_report([str(a), str(b)], by="parse_status")
    assert "| B | parse_status | n |" in paired
    assert f"| {b} | ok | 2 | 100.0 [34.2, 100.0] | 50.0 " in paired
    assert f"| {b} | failed | 1 | 0.0 " in paired and "| 0 / 1 |" in paired
    with pytest.raises(DataError, match="not both"):
        paired_report([str(a), str(b)], [item_slice("0:1")], by="parse_status")
    with pytest.raises(SystemExit):
        main(["report", str(a), "--cells", "--by", "parse_status"])

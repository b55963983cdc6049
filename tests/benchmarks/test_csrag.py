from pathlib import Path

import csrag
import pytest


@pytest.fixture
def write_grid_run(write_run):
    def write(folder: Path, name: str, method: str, right: list[bool], *, context="given",
              enhance=True, unbiased: list[bool] | None = None, dataset="set",
              free_form=False, case: list[bool] | None = None, lookup=0) -> None:
        """A run directory whose items t::0.. are right as given; `unbiased` adds grid cells,
        and `case` the case-variant cell."""
        records = []
        for i, ok in enumerate(right):
            record = {"id": f"t::{i}", "correct": ok, "gold_index": 0, "parse_status": "ok",
                      "choice_index": None if free_form else int(not ok)}
            if unbiased is not None:
                record["extra"] = {"variants": {
                    "a=-1 b=3": {"choice_index": 0 if ok else 1},
                    "a=0 b=0": {"choice_index": 0 if unbiased[i] else 1}}}
                if case is not None:
                    record["extra"]["variants"]["a=-1 b=3 +case"] = {
                        "choice_index": 0 if case[i] else 1}
            records.append(record)
        write_run(folder / name, {
            "dataset": dataset, "method": method, "context_mode": context,
            "config": {"csrag": {"enhance_context": enhance, "ablation_grid": unbiased is not None},
                       "llm": {"lookup_tokens": lookup}}}, records)
    return write


def test_roles_come_from_manifests_and_the_baseline_is_the_unbiased_cell(tmp_path, write_grid_run):
    write_grid_run(tmp_path, "b", "vanilla", [True] * 8 + [False] * 2)
    write_grid_run(tmp_path, "c", "csrag_json_scored", [True] * 9 + [False], enhance=False,
                   unbiased=[True] * 6 + [False] * 4)
    write_grid_run(tmp_path, "d", "csrag_json_scored", [True] * 7 + [False] * 3,
                   unbiased=[True] * 7 + [False] * 3)
    write_grid_run(tmp_path, "e", "cot_json_scored", [True] * 10)  # ignored: the grid cell wins

    [row] = csrag.collect([str(tmp_path)])
    assert row.baselines["original"][0] == row.baselines["full"][0] == "c@a=0 b=0"
    assert sum(row.outcomes["baseline"].values()) == 6
    lines = csrag.main_table([row])
    # original: 4 baseline errors -> 1 (75 %); full: 4 -> 3 (25 %)
    assert "| 75 % / 25 % |" in lines[2]
    assert "Errors removed, original, mean over 1 set(s): 75 %" in lines
    assert lines[2].startswith("| set | – | 80.0 [49, 94] (n 10) | 60.0")


def test_errors_removed_is_net_of_items_newly_lost():
    result = csrag.paired({"a": True, "b": False, "c": False, "d": True},
                               {"a": False, "b": False, "c": True, "d": True})
    # baseline wrong on a, b; CSRAG turns a right and c wrong: 2 errors -> 2 errors
    assert result["errors_removed"] == 0.0
    assert csrag.paired({"a": True}, {"a": True})["errors_removed"] is None


def test_without_a_grid_the_largest_cot_json_scored_run_is_the_baseline(tmp_path, write_grid_run):
    write_grid_run(tmp_path, "small", "cot_json_scored", [False] * 3)
    write_grid_run(tmp_path, "large", "cot_json_scored", [True] * 5)
    write_grid_run(tmp_path, "orig", "csrag_json_scored", [True] * 5, enhance=False)
    [row] = csrag.collect([str(tmp_path)])
    assert row.baselines["original"][0] == "large"
    assert csrag.baseline_sources(row) == "set: large"
    write_grid_run(tmp_path / "alone", "cot", "cot_json_scored", [True])  # no CSRAG run beside it
    [alone] = csrag.collect([str(tmp_path / "alone")])
    assert csrag.baseline_sources(alone) == "set: cot"


def test_each_csrag_run_is_compared_with_a_baseline_decoded_alike(tmp_path, write_grid_run):
    write_grid_run(tmp_path, "cot", "cot_json_scored", [True] * 2 + [False] * 2)
    write_grid_run(tmp_path, "orig", "csrag_json_scored", [True] * 4, enhance=False,
                   unbiased=[True] * 3 + [False], lookup=10)
    write_grid_run(tmp_path, "full", "csrag_json_scored", [True] * 3 + [False])
    [row] = csrag.collect([str(tmp_path)])
    assert row.baselines["original"][0] == "orig@a=0 b=0"
    assert row.baselines["full"][0] == "cot"
    lines = csrag.main_table([row])
    assert lines[2].startswith("| set | – | – | 75.0")  # the original run's baseline is shown
    assert "| 100 % / 50 % |" in lines[2]  # 1 error -> 0; 2 errors -> 1
    assert "set: the full method is compared with cot (50.0 [15, 85] (n 4)), decoded alike." in lines
    assert csrag.baseline_sources(row) == "set: orig@a=0 b=0 (original), cot (full)"


def test_a_baseline_decoded_otherwise_is_used_and_flagged(tmp_path, write_grid_run):
    write_grid_run(tmp_path, "cot", "cot_json_scored", [True] * 2 + [False] * 2)
    write_grid_run(tmp_path, "full", "csrag_json_scored", [True] * 4, lookup=10)
    [row] = csrag.collect([str(tmp_path)])
    assert row.baselines["full"][0] == "cot" and row.undecoded_alike == {"full"}
    assert "set: no baseline decoded like the full run; compared with cot." in \
        csrag.main_table([row])


def test_sets_come_in_the_issues_order_and_free_form_runs_are_flagged(tmp_path, write_grid_run):
    write_grid_run(tmp_path, "a", "vanilla", [True], dataset="cofaithfulqa_nq", free_form=True)
    write_grid_run(tmp_path, "b", "vanilla", [True], dataset="kre_squad")
    write_grid_run(tmp_path, "c", "vanilla", [True], dataset="another")
    rows = csrag.collect([str(tmp_path)])
    assert [r.dataset for r in rows] == ["kre_squad", "cofaithfulqa_nq", "another"]
    notes = [line for line in csrag.main_table(rows) if "free-form" in line]
    assert notes == [("cofaithfulqa_nq: vanilla answered free-form (scored by containment); "
                      "the other runs chose among the options.")]


def test_golden_runs_get_their_own_row_and_duplicates_are_refused(tmp_path, write_grid_run):
    write_grid_run(tmp_path, "g", "csrag_json_scored", [True] * 4, context="golden", enhance=False,
                   unbiased=[True] * 4)
    write_grid_run(tmp_path, "v", "vanilla", [True] * 4)
    rows = csrag.collect([str(tmp_path)])
    assert [(r.context, sorted(r.outcomes)) for r in rows] == [
        ("given", ["vanilla"]), ("golden", ["baseline", "original"])]
    assert "+0.0" in csrag.golden_table([rows[1]])[2]

    write_grid_run(tmp_path, "v2", "vanilla", [False] * 4)
    with pytest.raises(SystemExit, match="two vanilla runs for set"):
        csrag.collect([str(tmp_path)])


def test_the_case_variant_cell_is_reported_below_the_table_where_the_run_has_it(
        tmp_path, write_grid_run):
    write_grid_run(tmp_path / "one", "orig", "csrag_json_scored", [True] * 6 + [False] * 4,
                   enhance=False, unbiased=[True] * 5 + [False] * 5, case=[True] * 8 + [False] * 2,
                   dataset="cofaithfulqa_nq")
    write_grid_run(tmp_path / "two", "orig", "csrag_json_scored", [True] * 4, enhance=False,
                   unbiased=[True] * 4, dataset="kre_squad")  # made before the cell existed
    rows = csrag.collect([str(tmp_path / "one"), str(tmp_path / "two")])
    assert [sorted(r.outcomes) for r in rows] == [["baseline", "original"],
                                                  ["baseline", "original", "original_case"]]
    lines = csrag.main_table(rows)
    start = lines.index("Original context with case variants (cell `a=-1 b=3 +case`), "
                        "where the run has it:")
    # 5 baseline errors: the case cell leaves 2 (60 %), the default cell 4 (20 %)
    assert lines[start + 1].startswith("- cofaithfulqa_nq: 80.0")
    assert lines[start + 1].endswith("errors removed 60 %")
    assert lines[start + 2] == ("Errors removed, mean over these 1 set(s): 60 % with case "
                                "variants, 20 % with the default cell `a=-1 b=3`")
    # pooled over the one set that has the cell: 5 baseline errors, 3 / 0 and 1 / 0
    assert lines[start + 3].startswith("Pooled, original with case variants, 1 set(s), 10 items")
    assert lines[start + 4].startswith("Pooled, original, default cell, 1 set(s), 10 items")
    assert lines[start + 4].endswith("errors removed 20 %")
    assert len(lines) == start + 5


def test_the_full_methods_case_cell_is_scored_against_the_full_methods_baseline(
        tmp_path, write_grid_run):
    write_grid_run(tmp_path, "orig", "csrag_json_scored", [True] * 6 + [False] * 4, enhance=False,
                   unbiased=[True] * 5 + [False] * 5, dataset="cofaithfulqa_nq")
    write_grid_run(tmp_path, "full", "csrag_json_scored", [True] * 7 + [False] * 3,
                   unbiased=[True] * 7 + [False] * 3, case=[True] * 9 + [False],
                   dataset="cofaithfulqa_nq")
    [row] = csrag.collect([str(tmp_path)])
    assert "full_case" in row.outcomes and "original_case" not in row.outcomes
    lines = csrag.main_table([row])
    start = lines.index("Full method with case variants (cell `a=-1 b=3 +case`), "
                        "where the run has it:")
    # the baseline is the original run's unbiased cell, 5 errors: the case cell leaves 1 (80 %),
    # the full method's default cell 3 (40 %)
    assert lines[start + 1].startswith("- cofaithfulqa_nq: 90.0")
    assert lines[start + 1].endswith("errors removed 80 %")
    assert lines[start + 2] == ("Errors removed, mean over these 1 set(s): 80 % with case "
                                "variants, 40 % with the default cell `a=-1 b=3`")
    assert not any(line.startswith("Original context with case variants") for line in lines)


def test_each_comparison_is_also_pooled_over_the_sets(tmp_path, write_grid_run):
    # set one: 2 baseline errors, CSRAG fixes both; set two: 2 baseline errors, CSRAG fixes one
    # and loses one right item
    write_grid_run(tmp_path, "one", "csrag_json_scored", [True] * 4, enhance=False,
                   unbiased=[True] * 2 + [False] * 2, dataset="kre_squad")
    write_grid_run(tmp_path, "two", "csrag_json_scored", [True, False, True, False],
                   enhance=False, unbiased=[True, True, False, False], dataset="kre_musique")
    lines = csrag.main_table(csrag.collect([str(tmp_path)]))
    # per set 100 % and 0 %, mean 50 %; pooled 4 baseline errors, net 3 - 1 = 2 removed
    assert "Errors removed, original, mean over 2 set(s): 50 %" in lines
    [pooled] = [line for line in lines if line.startswith("Pooled, original")]
    assert pooled.startswith("Pooled, original, 2 set(s), 8 items: +25.0")
    assert "(3 / 1, p 0.62)" in pooled and pooled.endswith("errors removed 50 %")
    assert not any(line.startswith("Pooled, full") for line in lines)  # no full-method runs


def test_the_full_method_is_split_into_paraphrase_and_bias(tmp_path, write_grid_run):
    # baseline (the original run's unbiased cell) right on 0-5; the full run's unbiased cell
    # right on 0-3 (the paraphrase loses 4, 5), the full method right on 0-3 and 6 (the bias
    # gains 6)
    write_grid_run(tmp_path, "orig", "csrag_json_scored", [True] * 6 + [False] * 2,
                   enhance=False, unbiased=[True] * 6 + [False] * 2, dataset="kre_squad")
    write_grid_run(tmp_path, "full", "csrag_json_scored", [True] * 4 + [False] * 2 + [True, False],
                   unbiased=[True] * 4 + [False] * 4, dataset="kre_squad")
    write_grid_run(tmp_path / "no-grid", "full", "csrag_json_scored", [True] * 8,
                   dataset="kre_musique")
    lines = csrag.main_table(csrag.collect([str(tmp_path)]))
    start = next(i for i, line in enumerate(lines) if line.startswith("Full method in two steps"))
    assert lines[start + 1].startswith("- kre_squad: paraphrase -25.0")
    assert "(0 / 2, p 0.50), bias +12.5" in lines[start + 1]
    assert lines[start + 1].endswith("(1 / 0, p 1.00)")
    assert lines[start + 2].startswith("Pooled, paraphrase, 1 set(s), 8 items: -25.0")
    assert lines[start + 3].startswith("Pooled, bias, 1 set(s), 8 items: +12.5")
    assert len(lines) == start + 4  # kre_musique's full run has no grid: no steps


def test_baselines_run_every_method_on_every_set_then_compare_them(tmp_path, fake_executable,
                                                                   capsys):
    faithrag, calls = fake_executable()
    out = str(tmp_path / "base")
    csrag.main(["baselines", "--sets", "s1", "s2", "--methods", "vanilla", "cot_json",
                "--limit", "5", "--threads", "1", "--out", out, "--faithrag", faithrag])
    evals = calls()[:-1]
    assert [(c[3], c[5], c[-2]) for c in evals] == [
        ("s1", "vanilla", f"{out}/s1-vanilla"), ("s1", "cot_json", f"{out}/s1-cot_json"),
        ("s2", "vanilla", f"{out}/s2-vanilla"), ("s2", "cot_json", f"{out}/s2-cot_json")]
    assert evals[0] == ["eval", "--plain", "--dataset", "s1", "--method", "vanilla", "--limit",
                        "5", "--model", "default", "--threads", "1", "--out", f"{out}/s1-vanilla",
                        "--no-progress"]
    assert calls()[-1] == ["report", out, "--compare", "--out", f"{out}/report"]
    timings = (tmp_path / "base" / "timings.txt").read_text().splitlines()
    assert [line.rsplit(" ", 1)[0] for line in timings] == [
        "s1 vanilla", "s1 cot_json", "s2 vanilla", "s2 cot_json"]
    assert all(line.endswith("s") for line in timings)
    assert capsys.readouterr().out.count("s1 vanilla ") == 1


def test_run_main_extends_the_baselines_and_scores_every_cell_of_the_scored_runs(
        tmp_path, fake_executable):
    faithrag, calls = fake_executable()
    out, base = str(tmp_path / "csrag"), str(tmp_path / "baselines")
    csrag.main(["run", "main", "--sets", "s", "--baseline-methods", "vanilla", "--methods",
                "csrag", "csrag_choices", "--limit", "7", "--base-out", base, "--workers", "2",
                "--csrag-args", "--set llm.lookup_tokens=4", "--out", out,
                "--faithrag", faithrag])
    head = ["eval", "--plain", "--model", "default", "--threads", "2", "--workers", "2", "--no-progress",
            "--out"]
    assert calls() == [
        [*head, f"{base}/s-vanilla", "--dataset", "s", "--method", "vanilla", "--limit", "7"],
        [*head, f"{out}/main/s-csrag", "--dataset", "s", "--method", "csrag", "--limit", "7",
         "--set", "llm.lookup_tokens=4"],
        [*head, f"{out}/main/s-csrag_choices", "--dataset", "s", "--method", "csrag_choices",
         "--limit", "7", "--set", "llm.lookup_tokens=4", "--set", "csrag.ablation_grid=true"],
        ["report", "--cells", f"{out}/main/s-csrag_choices"],
        ["report", base, f"{out}/main", "--compare", "--out", f"{out}/report-main"]]
    grid_report = tmp_path / "csrag" / "main" / "grid-report.md"
    assert grid_report.read_text() == "output of report --cells\n"


def test_run_ablations_takes_the_ablation_limit_and_reports_them(tmp_path, fake_executable):
    faithrag, calls = fake_executable()
    out = str(tmp_path / "csrag")
    csrag.main(["run", "ablations", "--ablation-limit", "3", "--out", out, "--faithrag", faithrag])
    runs = [c[c.index("--out") + 1].rsplit("/", 1)[1] for c in calls()[:-2]]
    assert runs == ["enhanced+control", "original+control", "enhanced+no-control",
                    "original+no-control", "boost-only", "suppress-only", "alpha=-3", "alpha=-5",
                    "beta=1", "beta=5", "no-stopword-filter", "json_scored-original"]
    assert calls()[3][-8:] == ["--set", "llm.lookup_tokens=10", "--set",
                               "csrag.enhance_context=false", "--set", "csrag.alpha=0", "--set",
                               "csrag.beta=0"]
    assert calls()[-3][-6:] == ["--limit", "3", "--set", "csrag.enhance_context=false",
                                "--set", "csrag.ablation_grid=true"]
    assert calls()[-2:] == [["report", "--cells", f"{out}/ablations/json_scored-original"],
                            ["report", f"{out}/ablations", "--out", f"{out}/report-ablations"]]


def test_run_writes_the_main_table_of_the_table_runs(tmp_path, fake_executable, write_grid_run):
    faithrag, calls = fake_executable()
    write_grid_run(tmp_path / "csrag" / "table", "v", "vanilla", [True, False])
    csrag.main(["run", "golden", "--golden", "g", "--out", str(tmp_path / "csrag"),
                "--faithrag", faithrag])
    assert [c[c.index("--method") + 1] for c in calls()[:4]] == [
        "cot_json", "cot_json_scored", "csrag", "csrag_json_scored"]
    assert calls()[-1][:2] == ["report", str(tmp_path / "csrag" / "golden")]
    table = (tmp_path / "csrag" / "table" / "main-table.md").read_text()
    assert table == csrag.table_text([str(tmp_path / "csrag" / "table")]) + "\n"
    assert "| set | – | 50.0" in table

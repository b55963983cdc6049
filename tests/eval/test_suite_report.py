from faithrag.eval.suite_report import render_markdown, summarize


def record(slice_name, item, way, correct, *, informed=None, attacked=None, surfaced=False,
           flagged=None, seconds=1.0, status="ok"):
    out = {"id": f"{slice_name}/{item}/{way}", "slice": slice_name, "item": item, "way": way,
           "correct": correct, "informed": correct if informed is None else informed,
           "attacked": attacked, "surfaced": surfaced, "seconds": seconds,
           "parse_status": status}
    return out if flagged is None else {**out, "flagged": flagged}


def records():
    out = []
    for n in range(4):  # ramdocs: the pipeline gets two more right, at twice the time
        out += [record("ramdocs", n, "plain", n == 0),
                record("ramdocs", n, "pipeline", n < 3, surfaced=n > 0, seconds=2.0)]
    for n in range(2):  # hostile: the pipeline is attacked once less
        out += [record("kre_squad_hostile", n, "plain", False, attacked=True),
                record("kre_squad_hostile", n, "pipeline", n == 0, attacked=n == 1,
                       flagged=True)]
    out += [record("kre_squad_golden", 0, "plain", True),
            record("kre_squad_golden", 0, "pipeline", True, surfaced=True),
            record("kre_squad_golden", 1, "plain", True)]  # the other way has not run
    out.append({"id": "kre_squad_golden/2/plain", "slice": "kre_squad_golden", "item": 2,
                "way": "plain", "parse_status": "error", "error": "RuntimeError: gone"})
    out.append(record("kre_squad_golden", 2, "pipeline", True))
    return out


def test_rows_pair_the_ways_item_by_item_per_slice_kind_and_overall():
    summary = summarize(records())
    rows = {row["name"]: row for row in summary["slices"] + summary["kinds"]}
    ramdocs = rows["ramdocs"]
    assert ramdocs["n"] == 4
    assert ramdocs["correct"]["plain"]["k"] == 1 and ramdocs["correct"]["pipeline"]["k"] == 3
    paired = ramdocs["correct"]["paired"]
    assert (paired["difference"], paired["only_a"], paired["only_b"]) == (0.5, 2, 0)
    assert ramdocs["time_ratio"] == 2.0 and ramdocs["surfaced"]["k"] == 3
    hostile = rows["kre_squad_hostile"]
    assert hostile["attacked"]["plain"]["k"] == 2 and hostile["attacked"]["pipeline"]["k"] == 1
    assert "attacked" not in ramdocs
    # a record from before the flag policy counts as not flagged
    assert hostile["flagged"]["k"] == 2 and ramdocs["flagged"]["k"] == 0
    # an unpaired item and an item with an error are left out; the error is counted
    assert rows["kre_squad_golden"]["n"] == 1 and summary["errors"] == 1
    assert rows["clean slices"]["surfaced"] == {"k": 1, "n": 1, "rate": 1.0,
                                                "ci": rows["clean slices"]["surfaced"]["ci"]}
    assert summary["overall"]["n"] == 7 and rows["conflict slices"]["n"] == 6


def test_the_table_has_a_row_per_slice_then_the_groups():
    table = render_markdown(summarize(records()))
    lines = table.splitlines()
    assert lines[0].startswith("| slice | kind | n |")
    names = [line.split("|")[1].strip() for line in lines[2:] if line.startswith("|")]
    assert names == ["ramdocs", "kre_squad_hostile", "kre_squad_golden", "**conflict slices**",
                     "**clean slices**", "**all items**"]
    assert "| ramdocs | conflict | 4 | 25 [" in table and "+50.0 [" in table
    assert "(0 / 2, p 0.5)" in table  # plain only / pipeline only
    assert "| 3 / 0 of 4 |" in table and "| 0 / 2 of 2 |" in table  # surfaced / flagged
    assert "1 item(s) left out" in table

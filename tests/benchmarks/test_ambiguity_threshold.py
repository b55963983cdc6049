import ambiguity_threshold as tool
import bench_conflicts


def record(label, log_odds=None, ambiguous="no_conflict"):
    """An ambiguity record as bench_conflicts keeps it: with the same-subject log-odds when the
    passages disagreed (the `ambiguous` check then follows the default threshold)."""
    outputs = {} if log_odds is None else {"same_subject": {"pair": ["a", "b"],
                                                            "log_odds": log_odds}}
    if log_odds is not None:
        ambiguous = "conflict" if log_odds < tool.DEFAULT else "no_conflict"
    return {"command": "ambiguity", "dataset": "ramdocs", "label": label,
            "checks": {"ambiguous": ambiguous}, "detector": {"outputs": outputs},
            "generate_seconds": 1.0, "detect_seconds": 1.0}


RECORDS = [record(1, -0.9), record(0, 0.3), record(1, -0.3), record(0, -0.7),
           record(1, None, "could_not_tell"), record(0, None), record(1, -0.2), record(0, -0.1),
           record(1, -0.25), record(0, 0.2)]


def test_the_default_threshold_gives_the_recorded_checks_and_the_summary_row():
    row = bench_conflicts.confusion_row("ambiguity", "ramdocs", "all", "ambiguous",
                                        ("ambiguous",), RECORDS)
    rates = tool.rates(RECORDS, tool.DEFAULT)
    assert (rates["tp"], rates["fp"], rates["fn"]) == (row["tp"], row["fp"], row["fn"]) == (1, 1, 3)
    assert rates["precision"]["value"] == row["precision"]["value"] == 0.5


def test_a_threshold_is_chosen_on_the_tuning_records_and_graded_on_the_others():
    evaluation, tuning = tool.split(RECORDS, 2)
    assert [r["label"] for r in evaluation] == [1, 0, 1, 0]
    assert len(tuning) == 6
    chosen = tool.choose(tuning, 0.8)
    # tuning positives -0.2, -0.25 (one could not tell), negatives -0.1, 0.2 and one unchecked:
    # just above -0.2 flags both positives and no negative
    assert chosen["threshold"] == -0.1995
    assert (chosen["recall"]["value"], chosen["precision"]["value"]) == (1.0, 1.0)
    assert tool.status(RECORDS[4], chosen["threshold"]) == "could_not_tell"
    table = tool.report(RECORDS, 2, 0.8)
    assert "| -0.1995 | tuning, precision >= 0.8 |" in table
    assert "| 0.67 [0.21, 0.94] (2/3) | 1.00 [0.34, 1.00] (2/2) |" in table  # graded apart
    assert "No threshold" in tool.report(RECORDS, 2, 1.01)

from hypothesis import given
from hypothesis import strategies as st

from faithrag.methods.rank_parsing import (
    STATUS_FAILED,
    STATUS_NONE,
    STATUS_OK,
    STATUS_REPAIRED,
    parse_pair,
    parse_permutation,
    parse_verdict,
    tally,
)

# ------------------------------------------------------------------ permutation


def test_permutation_well_formed_and_one_id_per_line():
    parsed = parse_permutation("[2] > [3] > [1]", 3)
    assert parsed.order == [1, 2, 0] and parsed.status == STATUS_OK and parsed.repairs == {}
    listed = parse_permutation("\n1. [3]\n2. [1]\n3. [2]\n\nPassage [1] mentions the date.", 3)
    assert listed.order == [2, 0, 1] and listed.status == STATUS_OK


def test_permutation_repairs_are_applied_by_the_rule_and_counted():
    parsed = parse_permutation("[4] > [2] > [4] > [9] > [0] > [1]", 5)
    # first occurrences in order, duplicates and out-of-range dropped, missing appended in order
    assert parsed.order == [3, 1, 0, 2, 4]
    assert parsed.status == STATUS_REPAIRED
    assert parsed.repairs == {"duplicate": 1, "out_of_range": 2, "missing": 2}


def test_permutation_bare_numbers_and_failure():
    assert parse_permutation("3 > 1 > 2", 3).order == [2, 0, 1]
    failed = parse_permutation("I cannot rank these passages.", 3)
    assert failed.status == STATUS_FAILED and failed.order == [0, 1, 2]
    assert failed.repairs == {"missing": 3}
    assert parse_permutation("", 0).order == []


@given(st.text(max_size=300), st.integers(0, 30))
def test_fuzz_permutation_is_always_a_permutation(text, n):
    parsed = parse_permutation(text, n)
    assert sorted(parsed.order) == list(range(n))
    assert (parsed.status == STATUS_OK) == (not parsed.repairs)
    if parsed.status == STATUS_FAILED:  # no valid id at all: the input order, every id missing
        assert parsed.order == list(range(n)) and parsed.repairs.get("missing") == n > 0
    assert all(v > 0 for v in parsed.repairs.values())


@given(st.permutations(list(range(12))), st.sampled_from([" > ", ">", ", ", " "]))
def test_fuzz_permutation_roundtrip(order, sep):
    text = sep.join(f"[{i + 1}]" for i in order)
    parsed = parse_permutation(text, len(order))
    assert parsed.order == list(order) and parsed.status == STATUS_OK


@given(st.data())
def test_fuzz_permutation_injected_errors_are_counted(data):
    n = data.draw(st.integers(1, 15))
    order = data.draw(st.permutations(list(range(n))))
    keep = data.draw(st.integers(1, n))
    written = [i + 1 for i in order[:keep]]
    dups = data.draw(st.lists(st.sampled_from(written), max_size=4))
    outside = data.draw(st.lists(st.integers(n + 1, 10 * n + 20), max_size=4))
    noisy = written + dups + outside
    noisy = data.draw(st.permutations(noisy))
    parsed = parse_permutation(" > ".join(f"[{i}]" for i in noisy), n)
    first = list(dict.fromkeys(i - 1 for i in noisy if 1 <= i <= n))
    assert parsed.order == first + [i for i in range(n) if i not in first]
    assert parsed.repairs.get("duplicate", 0) == len(dups)
    assert parsed.repairs.get("out_of_range", 0) == len(outside)
    assert parsed.repairs.get("missing", 0) == n - keep


# ------------------------------------------------------------------ pair


def test_pair_variants():
    assert parse_pair("Conflict: [2] [5]", 6).pair == (1, 4)
    assert parse_pair("Conflict: [2] and [5] disagree on the year.", 6).status == STATUS_OK
    assert parse_pair("Passages 2 and 5 conflict", 6).pair == (1, 4)
    for none in ("Conflict: None", "None", "No conflict between [1] and [2].",
                 "There is no conflict.", "conflict: n/a", "**None**",
                 "No conflict: [1] and [2] both say 1887.",
                 "There is no conflict: passages 1 and 3 agree.",
                 "No conflict: all passages agree."):
        parsed = parse_pair(none, 6)
        assert parsed.pair is None and parsed.status == STATUS_NONE, none


def test_a_number_in_an_intro_line_is_no_id_when_the_ids_are_bracketed():
    assert parse_permutation("Here is the ranking of the 3 passages:\n\n[2] > [3] > [1]",
                             3).order == [1, 2, 0]
    assert parse_permutation("Ranking of the 3 passages:\n[2] > [3] > [1]", 3).order == [1, 2, 0]
    assert parse_pair("Among the 5 passages:\n[2] [4]", 5).pair == (1, 3)
    assert parse_permutation("2 > 3 > 1", 3).order == [1, 2, 0]  # bare ids without brackets


def test_pair_repairs_and_failures():
    repaired = parse_pair("Conflict: [7] [2] [2] [4] [5]", 6)
    assert repaired.pair == (1, 3) and repaired.status == STATUS_REPAIRED
    assert repaired.repairs == {"out_of_range": 1, "duplicate": 1, "extra": 1}
    # a year is not a passage id: out of range, counted
    years = parse_pair("Passage 2 says 1952 but passage 5 says 1960", 6)
    assert years.pair == (1, 4) and years.repairs == {"out_of_range": 2}
    for bad in ("Conflict: [3]", "Conflict: [2] [2]", "Conflict: [8] [9]", "", "yes"):
        parsed = parse_pair(bad, 6)
        assert parsed.pair is None and parsed.status == STATUS_FAILED, bad


@given(st.text(max_size=200), st.integers(0, 12))
def test_fuzz_pair_is_two_distinct_valid_ids_or_none(text, n):
    parsed = parse_pair(text, n)
    if parsed.pair is None:
        assert parsed.status in (STATUS_NONE, STATUS_FAILED)
    else:
        a, b = parsed.pair
        assert a != b and 0 <= a < n and 0 <= b < n
        assert parsed.status in (STATUS_OK, STATUS_REPAIRED)
        assert (parsed.status == STATUS_REPAIRED) == bool(parsed.repairs)


@given(st.integers(2, 20).flatmap(lambda n: st.tuples(
    st.just(n), st.integers(1, n), st.integers(1, n)).filter(lambda t: t[1] != t[2])))
def test_fuzz_pair_roundtrip(args):
    n, i, j = args
    assert parse_pair(f"Conflict: [{i}] [{j}]", n).pair == (i - 1, j - 1)


# ------------------------------------------------------------------ verdict


def test_verdict_variants():
    parsed = parse_verdict("Reason: B gives 1921, the others 1887.\nFalse passage: B")
    assert parsed.false_label == "B" and parsed.status == STATUS_OK
    assert parsed.reason == "B gives 1921, the others 1887."
    assert parse_verdict("**False passage:** [A]").false_label == "A"
    assert parse_verdict("Reason: x\nFalse: Passage A").false_label == "A"
    multi = parse_verdict("Reason: first line\nsecond line\nFalse passage: A")
    assert multi.reason == "first line second line"
    unlabelled = parse_verdict("A is consistent.\nFalse passage: B")
    assert unlabelled.reason == "A is consistent." and unlabelled.false_label == "B"


def test_verdict_failures_are_marked_not_guessed():
    for bad in ("Reason: A agrees with the others.", "False passage: A or B", "B", "",
                "False passage: C"):
        parsed = parse_verdict(bad)
        assert parsed.false_label is None and parsed.status == STATUS_FAILED, bad


def test_verdict_none_means_no_real_conflict():
    for none in ("Reason: both say 1887.\nFalse passage: None", "False passage: neither",
                 "False passage: **None** (no contradiction)"):
        parsed = parse_verdict(none)
        assert parsed.false_label is None and parsed.status == STATUS_NONE, none
    assert parse_verdict("Reason: both say 1887.\nFalse passage: None").reason == "both say 1887."


@given(st.text(max_size=300))
def test_fuzz_verdict_never_crashes(text):
    parsed = parse_verdict(text)
    assert parsed.false_label in (None, "A", "B")
    assert (parsed.false_label is None) == (parsed.status in (STATUS_FAILED, STATUS_NONE))
    assert len(parsed.reason) <= 600


@given(st.sampled_from(["A", "B"]),
       st.text(alphabet=st.characters(blacklist_categories=["Cc", "Cs", "Zl", "Zp"]),
               max_size=80))
def test_fuzz_verdict_roundtrip(label, reason):
    parsed = parse_verdict(f"Reason: {reason}\nFalse passage: {label}")
    assert parsed.false_label == label
    assert parsed.reason == " ".join(reason.split()).strip(" *_")


def test_tally_sums_statuses_and_repairs():
    counts = tally([parse_permutation("[2] > [2]", 2), parse_pair("Conflict: None", 3),
                    parse_verdict("nothing")])
    assert counts == {"outputs": 3, "failed": 1, "repaired": 1,
                      "repairs": {"duplicate": 1, "missing": 1}}


def test_verdict_at_the_end_of_the_reason_line():
    raw = ("Reason: Passage B claims it was opened in 1921, which contradicts A and the others. "
           "False passage: B")
    parsed = parse_verdict(raw)
    assert parsed.false_label == "B"
    assert parsed.reason == "Passage B claims it was opened in 1921, which contradicts A and " \
                            "the others."
    # "false" alone inside a sentence is not a verdict label
    assert parse_verdict("Reason: B is false: it says 1921.").status == STATUS_FAILED

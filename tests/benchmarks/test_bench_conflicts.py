"""benchmarks/bench_conflicts.py: the variants each measurement builds, the summaries, the
resumable runner (FakeLLM, control flow only) and a smoke run on the tiny model."""
import json

import bench_conflicts as bench
import pytest

from faithrag.llm.fake import FakeLLM


def kre(i: int, golden: str | None = "The tower was finished in 1889.") -> dict:
    meta = {"golden_answer": "1889"}
    if golden is not None:
        meta["golden_context"] = golden
    return {"id": f"kre_musique::q{i}", "question": f"When was tower {i} finished?",
            "context": "The tower was finished in 1920.", "answer": "1920",
            "choices": ["1920", "1889", "1700", "1999"], "answer_idx": 0,
            "parametric_answer": "1889", "meta": meta}


def rank(i: int, roles: list[str]) -> dict:
    relevance = {"reference": 2, "contrary": 0, "distractor": 0}
    return {"id": f"kre_conflict_rank::q{i}", "query": f"Question {i}?",
            "passages": [{"pid": f"q{i}#p{j}", "text": f"passage {j} ({role})",
                          "relevance": relevance[role], "is_contrary": role == "contrary",
                          "role": role} for j, role in enumerate(roles)]}


def ramdocs(i: int, golds: list[str], misinfo: list[str]) -> dict:
    docs = [{"title": "", "text": f"{g} did thing {i}.", "doc_type": "correct", "doc_answer": g}
            for g in golds]
    docs += [{"title": "", "text": f"{m} did thing {i}.", "doc_type": "misinfo",
              "doc_answer": m} for m in misinfo]
    docs.append({"title": "", "text": "Unrelated text.", "doc_type": "noise", "doc_answer": ""})
    return {"id": f"ramdocs::{i}", "question": f"Who did thing {i}?", "context": docs,
            "answer": golds[0], "answers": golds}


def different_subjects(score_choices):
    """No to "do the passages speak of the same subject"."""
    def score(request):
        scores = score_choices(request)
        return type(scores)(scores.choices, [-3.0, 0.0], scores.token_counts,
                            scores.prompt_tokens, scores.seconds)
    return score


def reads_passage(rules: dict[str, str], default: str = "NOT_IN_PASSAGE"):
    """A FakeLLM responder for the detector's readings, which show every passage: the reply of
    the first rule whose pattern is in the instruction after the passages (it quotes the
    passage read); the plain answer and memory get `default` unless a rule matches their whole
    prompt."""
    def respond(request):
        user = request.messages[-1].content
        tail = user.rsplit("</passage>", 1)[-1] if request.purpose == "passage_answer" else user
        return next((reply for pattern, reply in rules.items() if pattern in tail), default)
    return respond


def ramdocs_reader() -> FakeLLM:
    """Reads each `ramdocs` document as naming its band and judges any two documents to speak
    of different subjects."""
    llm = FakeLLM(reads_passage({"Mutemath did": "Mutemath", "Coldplay did": "Coldplay",
                                 "Beatles did": "The Beatles"}))
    llm.score_choices = different_subjects(llm.score_choices)
    return llm


# ---------------------------------------------------------------- variants

def test_memory_pairs_conflicting_and_golden_context_and_skips_items_without_golden(
        tmp_path, write_data_dir):
    root = write_data_dir(tmp_path, "kre_musique", [kre(0, None), kre(1), kre(2), kre(3)])
    cases = bench.memory_cases("kre_musique", 2, str(root))
    assert [(c.item, c.variant, c.label) for c in cases] == [
        ("kre_musique::q1", "conflicting", 1), ("kre_musique::q1", "golden", 0),
        ("kre_musique::q2", "conflicting", 1), ("kre_musique::q2", "golden", 0)]
    assert cases[0].passages[0].text == "The tower was finished in 1920."
    assert cases[1].passages[0].text == "The tower was finished in 1889."


def test_passage_window_keeps_both_sides_and_the_negative_drops_the_contrary(
        tmp_path, write_data_dir):
    items = [
        rank(0, ["distractor", "contrary", "distractor", "reference", "distractor", "distractor"]),
        # contrary and reference both beyond k = 3: each takes a distractor's place
        rank(1, ["distractor", "distractor", "distractor", "distractor", "reference",
                 "contrary"]),
        rank(2, ["reference", "distractor", "distractor"]),  # no contrary passage: skipped
    ]
    root = write_data_dir(tmp_path, "kre_conflict_rank", items)
    cases = bench.passages_cases("kre_conflict_rank", 10, str(root), 3)
    assert [(c.item, c.variant, c.label, [p.id for p in c.passages]) for c in cases] == [
        ("kre_conflict_rank::q0", "with_contrary", 1, ["q0#p0", "q0#p1", "q0#p3"]),
        ("kre_conflict_rank::q0", "without_contrary", 0, ["q0#p0", "q0#p3"]),
        ("kre_conflict_rank::q1", "with_contrary", 1, ["q1#p0", "q1#p4", "q1#p5"]),
        ("kre_conflict_rank::q1", "without_contrary", 0, ["q1#p0", "q1#p4"]),
    ]


def test_passages_take_items_in_turn_from_each_source(tmp_path, write_data_dir):
    roles = ["reference", "contrary", "distractor"]
    items = [dict(rank(i, roles), id=f"kre_musique::q{i}", source="musique") for i in range(3)]
    items += [dict(rank(i, roles), id=f"kre_squad::q{i}", source="squad") for i in range(3, 5)]
    root = write_data_dir(tmp_path, "kre_conflict_rank", items)
    cases = bench.passages_cases("kre_conflict_rank", 4, str(root), 3)
    assert [c.item for c in cases[::2]] == ["kre_musique::q0", "kre_squad::q3",
                                            "kre_musique::q1", "kre_squad::q4"]
    # one source left: the rest come from it
    cases = bench.passages_cases("kre_conflict_rank", 5, str(root), 3)
    assert cases[-1].item == "kre_musique::q2"


def test_passages_summary_adds_each_source_of_kre_conflict_rank():
    records = [dict(detection_record(i, label, "conflict"), command="passages",
                    dataset="kre_conflict_rank", item=f"{source}::q{i}",
                    checks={"passage_vs_passage": "conflict"})
               for i, source in ((0, "kre_musique"), (1, "kre_squad")) for label in (1, 0)]
    rows = [row for row in bench.detection_rows(records) if row["flag"] == "passage_vs_passage"]
    assert [(row["subset"], row["n_positive"], row["tp"]) for row in rows] == [
        ("all", 2, 2), ("MuSiQue items", 1, 1), ("SQuAD items", 1, 1)]
    # beside ramdocs_rank, the row over all sets does not repeat a subset of one set
    ramdocs_rank = [dict(r, dataset="ramdocs_rank", item="ramdocs::q9") for r in records[:2]]
    rows = [row for row in bench.detection_rows(records + ramdocs_rank)
            if row["flag"] == "passage_vs_passage"]
    assert [(row["dataset"], row["subset"]) for row in rows] == [
        ("kre_conflict_rank", "all"), ("kre_conflict_rank", "MuSiQue items"),
        ("kre_conflict_rank", "SQuAD items"), ("ramdocs_rank", "all"),
        (bench.ALL_SETS, "all")]


def test_ramdocs_passage_conflicts_are_scored_against_misinformation_not_several_answers():
    # (several gold answers, misinformation documents, passage_vs_passage reported)
    cases = [(1, 0, "no_conflict"), (1, 2, "conflict"), (0, 1, "conflict"), (0, 0, "conflict"),
             (0, 1, "no_conflict")]
    records = [dict(detection_record(i, label, "no_conflict"), command="ambiguity",
                    dataset="ramdocs", misinfo=misinfo,
                    checks={"ambiguous": "no_conflict", "passage_vs_passage": status})
               for i, (label, misinfo, status) in enumerate(cases)]
    (row,) = [r for r in bench.detection_rows(records) if r["flag"] == bench.MISINFORMATION_FLAG
              and r["subset"] == "all"]
    assert (row["n_positive"], row["n_negative"]) == (3, 2)
    assert (row["tp"], row["fn"], row["fp"], row["tn"]) == (2, 1, 1, 1)
    (ambiguous,) = [r for r in bench.detection_rows(records) if r["flag"] == "ambiguous"
                    and r["subset"] == "all"]
    assert (ambiguous["n_positive"], ambiguous["n_negative"]) == (2, 3)


def test_ambiguity_takes_limit_items_per_class_the_classes_alternating(tmp_path,
                                                                       write_data_dir):
    items = [ramdocs(0, ["A", "B"], []), ramdocs(1, ["C"], []), ramdocs(2, ["D", "E"], []),
             ramdocs(3, ["F"], ["G"]), ramdocs(4, ["H"], [])]
    root = write_data_dir(tmp_path, "ramdocs", items)
    cases = bench.ambiguity_cases(2, str(root))
    assert [(c.item, c.label) for c in cases] == [
        ("ramdocs::0", 1), ("ramdocs::1", 0), ("ramdocs::2", 1), ("ramdocs::3", 0)]
    assert len(cases[3].passages) == 3  # all its own documents
    # the classes alternate whatever the file order; the rest of the larger class comes last
    items = [ramdocs(i, ["A", "B"], []) for i in range(3)] + [ramdocs(3, ["C"], [])]
    root = write_data_dir(tmp_path / "several_first", "ramdocs", items)
    assert [(c.item, c.label) for c in bench.ambiguity_cases(5, str(root))] == [
        ("ramdocs::0", 1), ("ramdocs::3", 0), ("ramdocs::1", 1), ("ramdocs::2", 1)]


def test_surface_wrong_answers_are_misinfo_answers_that_are_not_gold(tmp_path, write_data_dir):
    root = write_data_dir(tmp_path, "ramdocs", [ramdocs(0, ["Mutemath", "Coldplay"],
                                                        ["The Beatles", "coldplay"])])
    [case] = bench.surface_cases(5, str(root))
    assert case.golds == ["Mutemath", "Coldplay"]
    assert case.wrongs == ["The Beatles"]


def test_poisoning_puts_the_poison_on_top_only_in_the_hostile_variant(tmp_path, write_data_dir):
    items = [kre(0, "Tower zero was finished in 1889."), kre(1, "Bridge one opened in 1901.")]
    root = write_data_dir(tmp_path, "kre_musique", items)
    cases = bench.poisoning_cases("kre_musique", 5, str(root))
    hostile, clean = cases[0], cases[1]
    assert (hostile.variant, hostile.label, clean.variant, clean.label) == (
        "hostile", 1, "clean", 0)
    assert hostile.passages[0].text == "The tower was finished in 1920."  # the poison, rank 0
    assert all(p.text != "The tower was finished in 1920." for p in clean.passages)
    assert clean.passages[0].text == "Tower zero was finished in 1889."
    assert len(cases) == 4 and hostile.golds == ["1889"] and hostile.wrongs == ["1920"]
    lane = bench.poisoning_cases("kre_musique", 5, str(root), offset=1)
    assert [c.item for c in lane] == [cases[2].item] * 2  # the second question, both variants


def test_an_offset_leaves_the_calibration_items_out_of_every_measurement(tmp_path,
                                                                        write_data_dir):
    root = write_data_dir(tmp_path / "kre", "kre_musique", [kre(i) for i in range(3)])
    assert [c.item for c in bench.memory_cases("kre_musique", 5, str(root), offset=2)] == [
        "kre_musique::q2"] * 2
    items = [ramdocs(i, ["A", "B"] if i % 2 else ["C"], []) for i in range(6)]
    root = write_data_dir(tmp_path / "ramdocs", "ramdocs", items)
    assert [c.item for c in bench.surface_cases(2, str(root), offset=3)] == [
        "ramdocs::3", "ramdocs::4"]
    # ambiguity counts its offset in file positions, as surface does, so both read one range
    assert [(c.item, c.label) for c in bench.ambiguity_cases(5, str(root), offset=3)] == [
        ("ramdocs::3", 1), ("ramdocs::4", 0), ("ramdocs::5", 1)]
    with pytest.raises(SystemExit):
        bench.main(["memory", "--offset", "-1", "--out", str(tmp_path)])


def test_lookalike_adds_distractors_that_hold_no_gold_answer(tmp_path, write_data_dir):
    def popqa(i, name):
        return {"id": f"popqa::{i}", "question": f"What is {name}'s occupation?",
                "context": [{"title": name, "text": f"{name} is a painter from Lyon."}],
                "answer": "painter" if i == 0 else "singer"}
    root = write_data_dir(tmp_path, "popqa", [popqa(0, "Ann Roe"), popqa(1, "Ann Rowe"),
                                              popqa(2, "Bob Stone")])
    [case] = bench.lookalike_cases("popqa", 1, str(root), distractors=1, offset=1)
    assert (case.item, case.label, case.variant) == ("popqa::1", 0, "distractors_1")
    own, added = case.passages
    assert "Ann Rowe" in own.text and added.meta.get("injected")
    assert "painter" in added.text  # a lookalike: not the item's answer ("singer")


# ---------------------------------------------------------------- scoring and summaries

def test_strict_criterion_needs_every_gold_and_no_wrong_answer():
    assert bench.strict_correct("Mutemath (per [1]); Coldplay (per [2])", ["Mutemath",
                                                                          "Coldplay"], [])
    assert not bench.strict_correct("Mutemath", ["Mutemath", "Coldplay"], [])
    assert not bench.strict_correct("Mutemath; Coldplay; The Beatles", ["Mutemath", "Coldplay"],
                                    ["The Beatles"])
    assert not bench.strict_correct("anything", [], [])


def test_flag_status_never_reads_could_not_tell_as_no_conflict():
    kinds = ("passage_vs_passage", "ambiguous")
    assert bench.flag_status({"passage_vs_passage": "conflict",
                              "ambiguous": "could_not_tell"}, kinds) == "conflict"
    assert bench.flag_status({"passage_vs_passage": "no_conflict",
                              "ambiguous": "could_not_tell"}, kinds) == "could_not_tell"
    assert bench.flag_status({"passage_vs_passage": "no_conflict",
                              "ambiguous": "no_conflict"}, kinds) == "no_conflict"
    assert bench.flag_status({"low_relevance": "conflict"}, kinds) is None


def detection_record(item: int, label: int, status: str) -> dict:
    return {"command": "memory", "dataset": "kre_musique", "item": f"q{item}",
            "variant": "conflicting" if label else "golden", "way": None, "label": label,
            "checks": {"context_vs_memory": status}, "generate_seconds": 1.0,
            "detect_seconds": 1.5}


def test_detection_summary_counts_precision_recall_and_keeps_could_not_tell_apart():
    records = ([detection_record(i, 1, "conflict") for i in range(6)]
               + [detection_record(i, 1, "no_conflict") for i in range(6, 8)]
               + [detection_record(i, 1, "could_not_tell") for i in range(8, 10)]
               + [detection_record(i, 0, "conflict") for i in range(2)]
               + [detection_record(i, 0, "no_conflict") for i in range(2, 9)]
               + [detection_record(9, 0, "could_not_tell")])
    memory, any_check = bench.detection_rows(records)
    assert (memory["flag"], any_check["flag"]) == ("context_vs_memory", "any check")
    row = memory
    assert (row["n_positive"], row["n_negative"]) == (10, 10)
    assert (row["tp"], row["fn"], row["fp"], row["tn"]) == (6, 2, 2, 7)
    assert (row["could_not_tell_positive"], row["could_not_tell_negative"]) == (2, 1)
    assert row["precision"]["value"] == 0.75 and row["precision"]["n"] == 8
    assert row["recall"]["value"] == 0.75 and row["recall"]["n"] == 8
    low, high = row["recall"]["ci"]
    assert 0.35 < low < 0.75 < high < 1.0
    assert row["detect_over_generate"] == 1.5
    assert row["false_alarm"]["value"] == round(2 / 9, 4)
    assert "0.75 [" in bench.render([row], [])


def test_a_measurement_on_several_sets_gets_a_row_over_all_of_them():
    musique = [detection_record(0, 1, "conflict"), detection_record(0, 0, "no_conflict")]
    squad = [dict(r, dataset="kre_squad") for r in (
        detection_record(0, 1, "no_conflict"), detection_record(0, 0, "conflict"))]
    rows = [row for row in bench.detection_rows(musique + squad)
            if row["flag"] == "context_vs_memory" and row["subset"] == "all"]
    assert [row["dataset"] for row in rows] == ["kre_musique", "kre_squad", bench.ALL_SETS]
    pooled = rows[-1]
    assert (pooled["tp"], pooled["fn"], pooled["fp"], pooled["tn"]) == (1, 1, 1, 1)
    assert (pooled["n_positive"], pooled["n_negative"]) == (2, 2)
    # one set alone: no pooled row
    assert {row["dataset"] for row in bench.detection_rows(musique)} == {"kre_musique"}


def test_memory_summary_adds_the_items_whose_closed_book_answer_is_the_golden_one():
    records = [detection_record(i, label, status) for i, label, status in
               ((0, 1, "conflict"), (0, 0, "no_conflict"), (1, 1, "no_conflict"),
                (1, 0, "conflict"))]
    for r in records:
        r["recalls_golden"] = r["item"] == "q0"
    rows = {row["subset"]: row for row in bench.detection_rows(records)
            if row["flag"] == "context_vs_memory"}
    assert set(rows) == {"all", "closed-book answer = golden answer",
                         "closed-book answer ≠ golden answer"}
    recalled = rows["closed-book answer = golden answer"]
    assert (recalled["n_positive"], recalled["n_negative"]) == (1, 1)
    assert (recalled["tp"], recalled["tn"]) == (1, 1)
    assert rows["all"]["recall"]["value"] == 0.5


def test_surface_summary_scores_each_way_on_common_items_with_a_paired_difference():
    def rec(item, way, strict, plain_strict=None):
        record = {"command": "surface", "dataset": "ramdocs", "item": item, "variant": "own",
                  "way": way, "strict": strict, "generate_seconds": 1.0,
                  "detect_seconds": 0.5 if way == "surface" else 0.0}
        if way == "surface":
            record["plain_strict"] = plain_strict
        return record
    records = [rec(f"q{i}", "surface", i < 3, i == 0) for i in range(4)]
    records[0]["doc_types"] = {"a": "correct", "b": "misinfo", "c": "misinfo"}
    records[0]["sides"] = [["passage_vs_passage", [["A", ["a"]], ["B", ["b"]]]],
                           ["context_vs_memory", [["C", []], ["C", ["c"]]]]]
    [row] = bench.surface_rows(records)
    assert row["n"] == 4
    assert row["plain"]["value"] == 0.25 and row["surface"]["value"] == 0.75
    assert row["detect_s_per_item"] == 0.5
    # of two misinformation documents, one is on a passage conflict's side of its own
    assert (row["misinfo_own_side"]["k"], row["misinfo_own_side"]["n"]) == (1, 2)
    assert row["surface_minus_plain"]["difference"] == 0.5
    assert row["surface_minus_plain"]["only_a"] == 2
    assert "surface − plain" in bench.render([], [row])


def test_threshold_table_recomputes_each_flag_from_the_recorded_signals():
    def memory(item, label, confidence, recalls):
        outputs = {"memory": {"status": "answer", "answer": "1889", "confidence": confidence},
                   "groups": [["1920", ["p"]]]}
        return {"command": "memory", "item": item, "label": label, "recalls_golden": recalls,
                "detector": {"outputs": outputs}}

    def lookalike(odds):
        outputs = {"memory": {"status": "no_answer", "answer": ""},
                   "groups": [["A", ["p1", "p2"]], ["B", ["p3"]]],
                   "question_subject": {"anchors": ["X"], "coverage": {"p3": odds}},
                   "same_subject": {"log_odds": 1.0}}
        return {"command": "lookalike", "item": "l", "label": 0,
                "detector": {"outputs": outputs}}
    drafted_from_lookalikes = lookalike(1.0)
    drafted_from_lookalikes["detector"]["outputs"]["question_subject"]["context"] = 0.0
    records = [memory("q0", 1, -0.2, True), memory("q1", 0, -0.2, False),
               memory("q2", 1, -0.9, True), lookalike(0.5), drafted_from_lookalikes]
    table = bench.threshold_table(records).splitlines()
    # at -0.5 the confident positive is flagged, the guess is not; the golden variant is
    assert "| memory_confidence | -0.5 | 0.50 [0.09, 0.91] (1/2) | 1.00 [0.21, 1.00] (1/1) |" \
        in table
    # a lookalike group against a context read from lookalikes: neither is left at 0.6
    assert any(line.startswith("| subject_coverage | 0.6 |")
               and line.endswith("(0/2) |") for line in table)
    assert any(line.startswith("| subject_coverage | 0.5 |")
               and line.endswith("(1/2) |") for line in table)
    assert any(line.startswith("| subject_coverage | 0.0 |")
               and line.endswith("(2/2) |") for line in table)


def test_dissent_signal_labels_each_dissent_by_its_documents_and_its_least_token():
    passages = {"c1": {"least_logprob": None}, "c2": {"least_logprob": -0.5},
                "n1": {"least_logprob": -3.0}, "m1": {"least_logprob": -1.0}}
    record = {"command": "surface", "way": "surface", "plain_answer": "Paris",
              "doc_types": {"c1": "correct", "c2": "correct", "n1": "noise", "m1": "misinfo"},
              "detector": {"outputs": {"groups": [["Paris", ["c1"]], ["Lyon", ["n1"]],
                                                  ["Nice", ["m1"]], ["Rome", ["c2"]]],
                                       "passages": passages}}}
    # a four-way tie: the plain answer's group is the context's; the others dissent
    assert bench.dissent_signal(record, -2.0) == [(False, False), (True, True), (True, True)]
    assert bench.dissent_signal(record, -0.75) == [(False, False), (True, False), (True, True)]
    table = bench.threshold_table([record]).splitlines()
    assert any(line.startswith("| reading's least token log-prob (dissent: from a document / "
                               "from noise alone) | -2.0 | 1.00") and line.endswith("(0/1) |")
               for line in table)


# ---------------------------------------------------------------- runner

def test_run_appends_a_record_per_case_and_resumes_without_repeating(tmp_path, write_data_dir):
    root = write_data_dir(tmp_path / "data", "kre_musique", [kre(0), kre(1)])
    cases = bench.memory_cases("kre_musique", 2, str(root))
    llm = FakeLLM(rules=[("1920", "1920"), ("1889", "1889")], default="1889")
    out = tmp_path / "out"
    out.mkdir()
    bench.run("memory", cases[:2], llm, {"use_cache": False}, out, lambda line: None)
    bench.run("memory", cases, llm, {"use_cache": False}, out, lambda line: None)
    records = bench.read_records(out / "records.jsonl")
    assert [(r["item"], r["variant"]) for r in records] == [
        ("kre_musique::q0", "conflicting"), ("kre_musique::q0", "golden"),
        ("kre_musique::q1", "conflicting"), ("kre_musique::q1", "golden")]
    # memory says 1889: the 1920 context conflicts with it, the golden one does not
    assert [r["checks"]["context_vs_memory"] for r in records] == [
        "conflict", "no_conflict"] * 2
    assert all(r["detect_seconds"] > 0 and r["generate_seconds"] > 0 for r in records)
    assert all(r["detect_tokens"][0] > 0 and r["generate_tokens"][0] > 0 for r in records)
    assert records[0]["detector"]["memory"] == "1889"
    assert all(r["recalls_golden"] for r in records)  # 1889 is the golden answer
    assert not any("golden_answer" in r for r in records)
    table = bench.summarize(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["detection"][0]["recall"]["value"] == 1.0
    assert "context_vs_memory" in table


def test_run_surface_answers_with_the_policy_and_keeps_plain_rags_answer(tmp_path,
                                                                         write_data_dir):
    root = write_data_dir(tmp_path / "data", "ramdocs",
                          [ramdocs(0, ["Mutemath", "Coldplay"], ["The Beatles"])])
    cases = bench.surface_cases(1, str(root))
    # the same-subject check scores Yes/No: different subjects (ambiguous)
    llm = ramdocs_reader()
    out = tmp_path / "out"
    out.mkdir()
    bench.run("surface", cases, llm, {"use_cache": False}, out, lambda line: None)
    records = {r["way"]: r for r in bench.read_records(out / "records.jsonl")}
    assert set(records) == {"surface"}
    assert records["surface"]["checks"]["ambiguous"] == "conflict"
    assert records["surface"]["doc_types"] == {"ramdocs::0#c0": "correct",
                                               "ramdocs::0#c1": "correct",
                                               "ramdocs::0#c2": "misinfo",
                                               "ramdocs::0#c3": "noise"}
    # plain RAG's answer is the surface run's answer before the policy: what vanilla gives
    plain = bench.Pipeline.from_parts(bench.configure(None, plain=True, use_cache=False),
                                      llm).run(cases[0].question, cases[0].passages)
    assert records["surface"]["plain_answer"] == plain.answer.text
    # RAMDocs' strict criterion: plain misses Coldplay; surface has both golds and also the
    # misinformation's answer, The Beatles
    assert "The Beatles" in records["surface"]["answer"]
    assert records["surface"]["strict"] is False and records["surface"]["plain_strict"] is False
    assert not any("golds" in r or "wrongs" in r for r in records.values())


def test_run_ambiguity_reads_an_item_surface_ran_and_agrees_with_running_it(
        tmp_path, write_data_dir):
    root = write_data_dir(tmp_path / "data", "ramdocs",
                          [ramdocs(0, ["Mutemath", "Coldplay"], ["The Beatles"]),
                           ramdocs(1, ["Mutemath"], ["The Beatles"])])
    llm = ramdocs_reader()
    reused, fresh = tmp_path / "reused", tmp_path / "fresh"
    reused.mkdir()
    fresh.mkdir()
    settings = {"use_cache": False}
    bench.run("surface", bench.surface_cases(1, str(root)), llm, settings, reused,
              lambda line: None)
    cases = bench.ambiguity_cases(1, str(root))
    calls = len(llm.calls)
    bench.run("ambiguity", cases[:1], llm, settings, reused, lambda line: None)
    assert len(llm.calls) == calls  # the several-answer item is read from the surface run
    bench.run("ambiguity", cases, llm, settings, reused, lambda line: None)
    bench.run("ambiguity", cases, llm, settings, fresh, lambda line: None)
    read = [r for r in bench.read_records(reused / "records.jsonl")
            if r["command"] == "ambiguity"]
    ran = bench.read_records(fresh / "records.jsonl")
    assert [r.get("from_run") for r in read] == ["surface", None]
    compared = ("item", "variant", "label", "passages", "checks", "conflicts", "answer",
                "detector", "llm_calls")
    assert [{k: r[k] for k in compared} for r in read] == [
        {k: r[k] for k in compared} for r in ran]
    assert read[0]["checks"]["ambiguous"] == "conflict"


def test_replay_reads_every_reply_back_and_finds_what_the_run_found(tmp_path, write_data_dir):
    root = write_data_dir(tmp_path / "data", "ramdocs",
                          [ramdocs(0, ["Mutemath", "Coldplay"], ["The Beatles"]),
                           ramdocs(1, ["Mutemath"], ["The Beatles"])])
    llm = ramdocs_reader()
    out = tmp_path / "out"
    out.mkdir()
    bench.run("surface", bench.surface_cases(2, str(root)), llm, {"use_cache": False}, out,
              lambda line: None)
    records = bench.read_records(out / "records.jsonl")
    table = bench.replay(records, str(root), 5, tmp_path / "replay")
    replayed = bench.read_records(tmp_path / "replay" / "replay.jsonl")
    assert [r["conflicts"] for r in replayed] == [sorted(r["conflicts"]) for r in records]
    assert [r["readings"] for r in replayed] == [
        sum(p["raw"] not in bench.UNREAD for p in r["detector"]["outputs"]["passages"].values())
        for r in records]
    assert [r["closed_book"] for r in replayed] == ["memory" in r["detector"]["outputs"]
                                                    for r in records] == [False, False]
    assert "| surface | ramdocs | 2 | 0 | 2 |" in table
    # a run that never asked for a reading the code asks for cannot be replayed
    records[0]["detector"]["outputs"]["passages"]["ramdocs::0#c1"]["raw"] = bench.HOLDS_DRAFT
    assert "| surface | ramdocs | 1 | 1 | 1 |" in bench.replay(records, str(root), 5,
                                                                tmp_path / "again")


def test_main_rejects_a_dataset_the_measurement_does_not_take(tmp_path):
    with pytest.raises(SystemExit):
        bench.main(["memory", "--dataset", "ramdocs", "--out", str(tmp_path)])


@pytest.mark.model
def test_memory_smoke_on_the_tiny_model(tmp_path, write_data_dir, capsys):
    root = write_data_dir(tmp_path / "data", "kre_musique", [kre(0)])
    bench.main(["memory", "--model", "tiny", "--limit", "1", "--data-dir", str(root),
                "--out", str(tmp_path / "out")])
    records = bench.read_records(tmp_path / "out" / "records.jsonl")
    assert [r["variant"] for r in records] == ["conflicting", "golden"]
    assert all(r["checks"]["context_vs_memory"] in ("conflict", "no_conflict", "could_not_tell")
               for r in records)
    assert "| memory | kre_musique | all | context_vs_memory | 1 / 1 |" in capsys.readouterr().out

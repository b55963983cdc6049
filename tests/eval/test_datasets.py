from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from faithrag.errors import DataError
from faithrag.eval.datasets import (
    DATA_DIR_ENV,
    ContextDoc,
    Dataset,
    QAItem,
    RankItem,
    list_datasets,
    load_dataset,
    resolve_data_dir,
    two_way_choices,
)

QA_MC = {"id": "s::1", "source": "src", "question": "Q?", "context": "C.",
         "answer": "b", "answers": ["b", "bee"], "choices": ["a", "b", "c"], "answer_idx": 1,
         "conflict_type": "counterfactual_context", "meta": {"k": 1}}
QA_DOCS = {"id": "s::2", "source": "src", "question": "Who?",
           "context": [{"title": "T1", "text": "one", "is_supporting": True},
                       {"title": "", "text": "two", "poisoned": True, "doc_type": "misinfo",
                        "doc_answer": "X", "extra_key": 5},
                       {"title": "T3", "text": "three", "stance": "counter"}],
           "answer": "Ann", "answers": ["Ann"], "parametric_answer": "bob"}
RANK = {"id": "r::1", "source": "src", "query": "q",
        "passages": [{"pid": "p0", "text": "a", "relevance": 2, "is_contrary": False,
                      "role": "reference"},
                     {"pid": "p1", "text": "b", "relevance": 0, "is_contrary": True,
                      "role": "contrary", "doc_answer": "Z"}],
        "meta": {"golden_answer": "g"}}


def write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "qa_set" / "dev.jsonl", [QA_MC, QA_DOCS])
    write_jsonl(tmp_path / "some_rank" / "dev.jsonl", [RANK])
    (tmp_path / "not_a_set").mkdir()
    return tmp_path


def test_list_and_load_typed_items(root: Path) -> None:
    assert list_datasets(root) == ["qa_set", "some_rank"]
    ds = load_dataset("qa_set", root)
    assert ds.kind == "qa" and len(ds) == 2 and ds.errors == []
    assert ds.sha256 == hashlib.sha256((root / "qa_set" / "dev.jsonl").read_bytes()).hexdigest()
    mc, docs = ds.items
    assert isinstance(mc, QAItem) and mc.choices is not None
    assert (mc.choices, mc.answer_idx, mc.answers, mc.meta) == (["a", "b", "c"], 1,
                                                                 ["b", "bee"], {"k": 1})
    assert isinstance(docs.context, list) and isinstance(docs.context[1], ContextDoc)
    assert docs.context[1].poisoned is True and docs.context[1].meta == {"extra_key": 5}
    assert docs.parametric_answer == "bob" and docs.choices is None

    rank = load_dataset("some_rank", root)
    assert rank.kind == "rank"
    item = rank[0]
    assert isinstance(item, RankItem)
    assert item.relevance() == {"p0": 2, "p1": 0} and item.contrary_pids() == {"p1"}
    assert item.passages[1].meta == {"doc_answer": "Z"}
    assert [p.id for p in item.as_passages()] == ["p0", "p1"]
    assert item.as_passages()[1].meta["is_contrary"] is True


def test_item_passages_and_question(root: Path) -> None:
    mc, docs = load_dataset("qa_set", root).items
    [single] = mc.passages()
    assert (single.id, single.text, single.source) == ("s::1#c0", "C.", "context")
    passages = docs.passages()
    assert [p.text for p in passages] == ["one", "two", "three"]
    assert [p.title for p in passages] == ["T1", "", "T3"]
    assert passages[0].meta == {"is_supporting": True}
    assert passages[1].meta == {"poisoned": True, "doc_type": "misinfo", "doc_answer": "X",
                                "extra_key": 5}
    assert passages[2].meta == {"stance": "counter"}
    question = mc.as_question()
    assert (question.text, question.id, question.choices) == ("Q?", "s::1", ["a", "b", "c"])
    no_context = QAItem("x", "s", "q", None, "a", ["a"])
    assert no_context.passages() == []


def test_the_corpus_holds_each_context_text_once() -> None:
    shared, own = ContextDoc("Canberra is the capital."), ContextDoc("Sydney is larger.")
    items = [QAItem(id=f"q{i}", source="toy", question="Capital?", context=docs, answer="x",
                    answers=["x"]) for i, docs in enumerate(([shared], [shared, own]))]
    corpus = Dataset("toy", Path("toy.jsonl"), "dev", "qa", "", items).corpus()
    assert [(p.id, p.text) for p in corpus] == [("q1#c0", shared.text), ("q1#c1", own.text)]


def test_single_file_mode(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mine.jsonl", [QA_MC])
    ds = load_dataset(file=path)
    assert ds.name == "mine" and len(ds) == 1
    nested = write_jsonl(tmp_path / "popqa" / "dev.jsonl", [QA_MC])
    assert load_dataset(file=nested).name == "popqa"
    with pytest.raises(DataError):
        load_dataset(file=tmp_path / "missing.jsonl")


def test_data_dir_resolution(root: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(root))
    assert resolve_data_dir() == root
    assert load_dataset("qa_set").path == root / "qa_set" / "dev.jsonl"
    other = tmp_path / "other"
    write_jsonl(other / "x" / "dev.jsonl", [QA_MC])
    assert list_datasets(other) == ["x"]  # the argument wins over the environment
    monkeypatch.delenv(DATA_DIR_ENV)
    monkeypatch.chdir(tmp_path / "not_a_set")  # ../shared/data from here does not exist
    with pytest.raises(DataError) as info:
        list_datasets()
    assert "--data-dir" in info.value.hint and DATA_DIR_ENV in info.value.hint


def test_unknown_dataset_lists_available(root: Path) -> None:
    with pytest.raises(DataError) as info:
        load_dataset("nope", root)
    assert "qa_set" in info.value.hint


BAD_LINES = [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ({**QA_MC, "id": "b1", "answer_idx": 3}, "out of range"),
    ({**QA_MC, "id": "b2", "answer_idx": 0}, "is not the answer"),
    ({**QA_MC, "id": "b3", "answer_idx": True}, "answer_idx must be an int"),
    ({**QA_MC, "id": "b4", "choices": ["b"], "answer_idx": 0}, "at least 2"),
    ({**QA_MC, "id": "b5", "choices": ["b", "B."], "answer_idx": 0}, "matches several"),
    ({k: v for k, v in QA_MC.items() if k != "question"} | {"id": "b6"}, "'question'"),
    ({**QA_MC, "id": "b7", "answers": ["bee", "b"]}, "answers[0]"),
    ({**QA_MC, "id": "b8", "context": 5}, "context must be"),
    ({**QA_DOCS, "id": "b9", "context": [{"title": "no text"}]}, "lacks 'text'"),
    ({**QA_DOCS, "id": "b10", "context": [{"text": "t", "poisoned": "yes"}]}, "poisoned must be"),
    ({**QA_MC, "id": "b11", "colour": "red"}, "unknown key"),
    ({**QA_MC, "id": "b12", "question": "  "}, "question is empty"),
    ({**QA_DOCS, "id": "b13", "answer_idx": 0}, "without choices"),
    ({**QA_MC, "id": 7}, "id must be a string"),
    ({**QA_MC, "id": "b14", "meta": []}, "meta must be"),
    ({**QA_MC, "id": "b15", "context": " \n"}, "context is empty"),
    ({**QA_DOCS, "id": "b16", "context": []}, "empty list"),
    ({**QA_DOCS, "id": "b17", "context": [{"text": "  "}]}, "empty 'text'"),
    (QA_MC, "duplicate id"),
    (RANK, "unknown key"),  # a ranking line in a QA file
]


def test_malformed_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    rows = [QA_MC, *[row for row, _ in BAD_LINES], "", QA_DOCS]
    path = write_jsonl(tmp_path / "mixed" / "dev.jsonl", rows)
    ds = load_dataset("mixed", tmp_path, on_error="skip")
    assert [item.id for item in ds] == ["s::1", "s::2"]
    assert len(ds.errors) == len(BAD_LINES)
    for error, (_, expected), line in zip(ds.errors, BAD_LINES, range(2, 100)):
        assert error.file == str(path) and error.line == line
        assert expected in error.message, (expected, error.message)
    assert str(ds.errors[0]).startswith(f"{path}:2: invalid JSON")


def test_malformed_line_raises_with_location(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "bad" / "dev.jsonl",
                       [QA_MC, {**QA_MC, "id": "x", "answer_idx": 9}])
    with pytest.raises(DataError) as info:
        load_dataset("bad", tmp_path, on_error="raise")
    assert f"{path}:2:" in info.value.message and "out of range" in info.value.message
    assert "on_error" in info.value.hint


def test_rank_validation(tmp_path: Path) -> None:
    bad = [
        ({**RANK, "id": "r2", "passages": []}, "non-empty list"),
        ({**RANK, "id": "r3", "passages": [{"pid": "p", "text": "t"}]}, "lacks 'relevance'"),
        ({**RANK, "id": "r4", "passages": [{"pid": "p", "text": "t", "relevance": -1}]},
         "relevance must be >= 0"),
        ({**RANK, "id": "r5", "passages": [{"pid": "p", "text": "t", "relevance": 1.5}]},
         "relevance must be int"),
        ({**RANK, "id": "r6", "passages": [RANK["passages"][0], RANK["passages"][0]]},
         "duplicate pid"),
        (QA_MC, "unknown key"),  # a QA line in a ranking file
    ]
    write_jsonl(tmp_path / "r" / "dev.jsonl", [RANK, *[row for row, _ in bad]])
    ds = load_dataset("r", tmp_path)
    assert len(ds) == 1
    assert [e.line for e in ds.errors] == list(range(2, 2 + len(bad)))
    for error, (_, expected) in zip(ds.errors, bad):
        assert expected in error.message, (expected, error.message)


def test_file_without_valid_items_is_an_error(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "junk" / "dev.jsonl", ["{oops"])
    with pytest.raises(DataError, match="no valid item"):
        load_dataset("junk", tmp_path)


def test_on_error_value_is_checked(root: Path) -> None:
    with pytest.raises(ValueError):
        load_dataset("qa_set", root, on_error="ignore")


def make_conflict_item(item_id: str, answer: str = "Louisville RiverBats",
                       parametric: str | None = "cincinnati reds",
                       answers: list[str] | None = None) -> QAItem:
    return QAItem(item_id, "s", "q", "ctx", answer, answers or [answer],
                  parametric_answer=parametric)


def test_two_way_choices_rule() -> None:
    orders = set()
    for i in range(40):
        item = make_conflict_item(f"cofaithfulqa_nq::{i}")
        result = two_way_choices(item, seed=3)
        assert result is not None
        assert sorted(result.choices) == ["cincinnati reds", "louisville riverbats"]
        assert result.choices[result.answer_idx] == "louisville riverbats"
        assert two_way_choices(item, seed=3) == result  # deterministic
        digest = hashlib.sha256(f"3:{item.id}".encode()).digest()
        assert result.answer_idx == (0 if digest[0] % 2 == 0 else 1)
        orders.add(result.answer_idx)
    assert orders == {0, 1}
    assert two_way_choices(make_conflict_item("a", "Lars von Trier.", "satan"), 0).choices in (
        ["lars von trier", "satan"], ["satan", "lars von trier"])


def test_two_way_choices_none_cases() -> None:
    assert two_way_choices(make_conflict_item("a", parametric=None), 0) is None
    assert two_way_choices(make_conflict_item("a", parametric="  "), 0) is None
    assert two_way_choices(make_conflict_item("a", "The Sun", "sun"), 0) is None
    assert two_way_choices(make_conflict_item("a", "two", "2"), 0) is None
    assert two_way_choices(make_conflict_item("a", "11 March 2011,", "march 11 2011"), 0) is None
    assert two_way_choices(make_conflict_item("a", "Serie B", "serie"), 0) is not None
    alias = make_conflict_item("a", "luteinizing", "Luteinizing hormone",
                               ["luteinizing", "luteinizing hormone"])
    assert two_way_choices(alias, 0) is None
    mc = QAItem("m", "s", "q", None, "a", ["a"], choices=["a", "b"], answer_idx=0)
    with pytest.raises(ValueError):
        two_way_choices(mc, 0)


SHARED_DATA = Path(os.environ.get(DATA_DIR_ENV) or Path(__file__).resolve().parents[3]
                   / "shared" / "data")


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data not present ({SHARED_DATA})")
def test_shared_data_loads_without_errors() -> None:
    names = list_datasets(SHARED_DATA)
    assert len(names) >= 16
    for name in names:
        ds = load_dataset(name, SHARED_DATA, on_error="raise")
        assert ds.kind == ("rank" if name.endswith("_rank") else "qa"), name
        assert len(ds) > 0
        if name.startswith("cofaithfulqa_"):  # a few memory answers are "", "An" or "2"/"two"
            derived = [two_way_choices(item, 0) for item in ds]
            assert sum(d is None for d in derived) <= len(ds) // 50, name
            share_first = sum(d.answer_idx == 0 for d in derived if d) / len(ds)
            assert 0.4 < share_first < 0.6, name

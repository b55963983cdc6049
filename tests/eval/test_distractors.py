import json

import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.datasets import load_dataset
from faithrag.eval.distractors import DistractorPool
from faithrag.eval.run_dir import ResultsFile
from faithrag.eval.runner import EvalSpec, run_eval
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline

ITEMS = [
    ("q0", "Who painted the Harbour Lanterns mural?",
     ["The Harbour Lanterns mural was painted by Ines Varga."], "Ines Varga"),
    ("q1", "Who restored the Harbour Lanterns mural?",
     ["Ines Varga restored the Harbour Lanterns mural in 1990."], "Ines Varga"),
    ("q2", "Who funded the Harbour Lanterns festival?",
     ["The Harbour Lanterns festival was funded by the city."], "the city"),
    ("q3", "Where is the mural of the lanterns?", ["The mural of the lanterns is on Dock Road."],
     "Dock Road"),
    ("q4", "What is the capital of Peru?", ["Lima is the capital of Peru."], "Lima"),
]


def write_set(path):
    with open(path, "w") as f:
        f.writelines(json.dumps({"id": item_id, "question": question, "answer": answer,
                                 "context": [{"title": "", "text": t} for t in texts]}) + "\n"
                     for item_id, question, texts, answer in ITEMS)
    return path


def test_distractors_resemble_the_question_come_from_other_items_and_hold_no_gold(tmp_path):
    dataset = load_dataset(file=write_set(tmp_path / "set.jsonl"))
    item = dataset.items[0]
    chosen = DistractorPool(dataset).select(item, 2)
    texts = [p.text for p in chosen]
    # q1's passage is the most similar but names the gold answer "Ines Varga": skipped
    assert not any("Ines Varga" in t for t in texts)
    # BM25 order: q3's passage shares "mural" and "lanterns", q2's only "harbour" and "lanterns"
    assert texts == [ITEMS[3][2][0], ITEMS[2][2][0]]
    assert ITEMS[4][2][0] not in texts  # Peru shares nothing with the question
    assert [p.id for p in chosen] == ["q0#d0", "q0#d1"]
    assert all(p.source == "distractor" and p.meta["injected"] for p in chosen)
    assert DistractorPool(dataset).select(item, 0) == []


def test_lists_are_nested_and_never_hold_the_items_own_passages(tmp_path):
    dataset = load_dataset(file=write_set(tmp_path / "set.jsonl"))
    pool = DistractorPool(dataset)
    for item in dataset.items:
        big = [p.text for p in pool.select(item, 3)]
        assert [p.text for p in pool.select(item, 1)] == big[:1]
        assert not set(big) & {p.text for p in item.passages()}
    assert len(pool.select(dataset.items[0], 50)) == 2  # only two candidates qualify


def build(config, llm, retriever):
    return Pipeline(registry.build("generator", config.pipeline.method, llm, config, retriever), retriever,
                    k=config.retrieval.k)


def test_item_retrieval_with_injected_distractors(tmp_path):
    data = write_set(tmp_path / "set.jsonl")
    config = Config.load(None, {"llm.backend": "fake", "retrieval.k": 1})
    llm = FakeLLM(default="Ines Varga")
    spec = EvalSpec("set", file=str(data), context_mode="item_retrieval",
                    sweep={"distractors": 2})
    summary = run_eval(spec, config, tmp_path / "run", llm, build, progress=False)
    assert summary["n"] == 5
    records = {r["id"]: r for r in ResultsFile(tmp_path / "run/results.jsonl").records}
    assert records["q0"]["extra"]["injected"] == ["q3#c0", "q2#c0"]
    # k=1: the one passage retrieved for q0 is its own, which matches the question best
    assert records["q0"]["extra"]["injected_in_evidence"] == 0
    assert llm.calls[0].messages[-1].content.count("<passage") == 1
    manifest = json.loads((tmp_path / "run/manifest.json").read_text())
    assert manifest["sweep"] == {"distractors": 2}
    assert manifest["context_mode"] == "item_retrieval"


def test_given_mode_appends_the_distractors(tmp_path):
    data = write_set(tmp_path / "set.jsonl")
    llm = FakeLLM(default="x")
    run_eval(EvalSpec("set", file=str(data), limit=1, sweep={"distractors": 1}),
             Config.load(None, {"llm.backend": "fake"}), tmp_path / "run", llm, build,
             progress=False)
    prompt = llm.calls[0].messages[-1].content
    assert prompt.index(ITEMS[0][2][0]) < prompt.index(ITEMS[3][2][0])


@pytest.mark.parametrize("mode, sweep", [("given", {"distractors": -1}),
                                         ("given", {"distractors": 1.5}),
                                         ("retrieval", {"distractors": 2})])
def test_bad_distractor_settings_are_refused(mode, sweep):
    with pytest.raises(ConfigError):
        EvalSpec("set", context_mode=mode, sweep=sweep)


def test_a_passage_giving_the_gold_in_smart_em_form_is_no_distractor(tmp_path):
    rows = [{"id": "q0", "question": "How many moons does Mars have?", "answer": "2",
             "context": [{"title": "", "text": "Mars is the fourth planet from the Sun."}]},
            {"id": "q1", "question": "What are the names of the moons of Mars?",
             "answer": "Phobos and Deimos",
             "context": [{"title": "", "text": "Mars has two moons, Phobos and Deimos."}]},
            {"id": "q2", "question": "Which planet is red?", "answer": "Mars",
             "context": [{"title": "", "text": "Mars, the red planet, has moons."}]}]
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dataset = load_dataset(file=path)
    chosen = DistractorPool(dataset).select(dataset.items[0], 2)
    assert [p.text for p in chosen] == ["Mars, the red planet, has moons."]

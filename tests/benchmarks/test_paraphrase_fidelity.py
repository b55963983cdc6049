import json

import paraphrase_fidelity
import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.eval.datasets import load_dataset
from faithrag.eval.runner import EvalSpec, run_eval
from faithrag.llm.fake import FakeLLM
from faithrag.methods.csrag.cache import JsonCache
from faithrag.pipeline import Pipeline

PASSAGE = "In 2031 the Australian parliament moved the capital to Sydney, a city of 5.3 million."


def test_each_check_flags_its_own_kind_of_unfaithful_rewrite():
    check = paraphrase_fidelity.check_rewrites
    faithful = "The Australian parliament moved the capital to Sydney (5.3 million) in 2031."
    assert not any(check(PASSAGE, [faithful], cut=False, answer="Sydney").values())
    found = check(PASSAGE, [faithful, "In 2031 Canberra's parliament moved the capital."],
                  cut=True, answer="Sydney")
    assert found == {"cut": True, "answer dropped": True, "number dropped": True,
                     "number added": False, "name added": True}
    assert check(PASSAGE, ["In 2032 it moved to Sydney, with 5.3 million people."], False,
                 "Sydney")["number added"]
    # sentence-initial stopwords are not names, and an answer the passage never states is no loss
    assert check(PASSAGE, ["It moved in 2031; The city, Sydney, has 5.3 million."], False,
                 "Perth") == dict.fromkeys(paraphrase_fidelity.CHECKS, False)


def test_reads_the_rewrites_a_csrag_run_cached_and_splits_items_by_the_unbiased_cell(
        tmp_path, monkeypatch, write_run):
    monkeypatch.setenv("FAITHRAG_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps({
        "id": f"t::{i}", "question": "What is the capital of Australia?",
        "context": PASSAGE.replace("2031", str(2031 + i)), "choices": ["Canberra", "Sydney"],
        "answer_idx": 1, "answer": "Sydney", "answers": ["Sydney"]}) + "\n" for i in range(2)))

    def respond(request):
        if request.purpose == "facts":
            return "- Canberra is the capital."
        if request.purpose == "paraphrase":  # drops the year and the answer
            return "[PARAPHRASE]: The parliament moved the capital."
        return '{"Reason": "the passage says so", "Answer": "Sydney"}'

    config = Config.load(None, {"llm.backend": "fake", "csrag.ablation_grid": True})
    llm = FakeLLM(respond, choice_prior={'Canberra"': 0.0, 'Sydney"': -1.5}.__getitem__)
    spec = EvalSpec("set", method="csrag_json_scored", file=str(data))
    run_eval(spec, config, tmp_path / "run", llm, lambda cfg, model, retriever: Pipeline(
        registry.build("generator", spec.method, model, cfg, retriever), retriever), progress=False)

    cache = JsonCache(tmp_path / "cache" / "csrag" / "paraphrases")
    items = load_dataset(file=data)
    found = [paraphrase_fidelity.item_fidelity(item, cache, "FakeLLM:fake", 1024)
             for item in items]
    assert all(f.flags["answer dropped"] and f.flags["number dropped"] for f in found)
    assert paraphrase_fidelity.item_fidelity(items[0], cache, "LlamaCppLLM:default", 1024) is None

    # the original-context run: right on t::0, wrong on t::1; the unbiased cell picks Canberra
    original = write_run(tmp_path / "original", {"dataset": "set", "method": "vanilla"},
                         [{"id": "t::0", "correct": True}, {"id": "t::1", "correct": False}])
    group_of = paraphrase_fidelity.groups(str(tmp_path / "run"), str(original))
    assert group_of == {"t::0": "lost", "t::1": "unchanged"}
    # a cell on the original side: this biased cell picks Sydney, so both items count as lost
    assert set(paraphrase_fidelity.groups(str(tmp_path / "run"),
                                          f"{tmp_path / 'run'}@a=-5 b=3").values()) == {"lost"}
    with pytest.raises(SystemExit, match="has no cell 'a=9 b=9'"):
        paraphrase_fidelity.groups(f"{tmp_path / 'run'}@a=9 b=9", str(original))
    table = paraphrase_fidelity.table(dict(zip(["t::0", "t::1"], found)), group_of)
    assert table[2].startswith("| all with rewrites | 2 | 0 | 2 | 2 |")
    assert table[3].startswith("| lost | 1 |") and table[4] == "| gained | 0 |" + " |" * 6

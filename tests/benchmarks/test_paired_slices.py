import json

import paired_slices
import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.eval.runner import EvalSpec, run_eval
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline


def respond(request):
    if request.purpose == "facts":
        return "- Canberra is the capital."
    return '{"Reason": "the passage says Sydney", "Answer": "Sydney"}'


def test_a_cell_of_a_json_scored_grid_run_is_scored_as_its_own_run(tmp_path):
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps({
        "id": f"t::{i}", "question": "What is the capital of Australia?",
        "context": "Since 2031 the capital is Sydney.", "choices": ["Canberra", "Sydney"],
        "answer_idx": 1, "answer": "Sydney", "answers": ["Sydney"]}) + "\n" for i in range(3)))
    config = Config.load(None, {"llm.backend": "fake", "csrag.ablation_grid": True,
                                "csrag.enhance_context": False, "use_cache": False})
    # the fake "remembers" Canberra; options are scored with their closing quote
    llm = FakeLLM(respond, choice_prior={'Canberra"': 0.0, 'Sydney"': -1.5}.__getitem__)
    spec = EvalSpec("set", method="csrag_json_scored", file=str(data))
    run_eval(spec, config, tmp_path / "run", llm, lambda cfg, model, retriever: Pipeline(
        registry.build("generator", spec.method, model, cfg, retriever), retriever), progress=False)

    assert paired_slices.scored(str(tmp_path / "run"))[1] == dict.fromkeys(
        ["t::0", "t::1", "t::2"], True)
    assert set(paired_slices.scored(f"{tmp_path / 'run'}@a=0 b=0")[1].values()) == {False}
    with pytest.raises(SystemExit, match="no cell 'a=9 b=9'"):
        paired_slices.scored(f"{tmp_path / 'run'}@a=9 b=9")

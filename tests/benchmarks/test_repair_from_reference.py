import json
import re

import repair_from_reference

from faithrag import registry
from faithrag.config import Config
from faithrag.eval.hostile_runner import run_hostile
from faithrag.eval.hostile_settings import build_setting
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline

ANSWER_IS = re.compile(r"the answer is (\w+)")


def build(config, llm, retriever):
    return Pipeline(registry.build("generator", config.pipeline.method, llm, config, retriever),
                    retriever, verifier=registry.build("verifier", "antisyco", llm, config,
                                                       retriever), k=config.retrieval.k)


def respond(request):
    """Reads the first 'answer' of its passages, except the repair request, which always says
    1921 (the first item's poison)."""
    if request.purpose == "repair":
        return "1921"
    found = ANSWER_IS.findall(request.messages[-1].content)
    if request.purpose == "contradiction":
        return f"ANSWER: {found[0]}" if found else "ANSWER: NOT STATED"
    return found[0] if found else "no idea"


def test_scores_the_reference_answer_against_the_repair_request(hostile_data, tmp_path):
    setting = build_setting("kre_musique", str(hostile_data))
    config = Config.load(None, {"llm.backend": "fake", "antisyco.judge_tokens": 64,
                                "pipeline.verify": "antisyco", "antisyco.repair": "reanswer"})
    run_hostile(setting, "hostile", config, tmp_path / "run", FakeLLM(respond), build,
                progress=False)
    row = repair_from_reference.compare(tmp_path / "run", str(hostile_data))
    # every draft is the poison, every reference the trusted gold; the request said 1921
    assert (row["repair"], row.get("asked_again", 0), row["same_answer"]) == (3, 0, 0)
    assert (row["request_correct"], row["reference_correct"]) == (0, 3)
    assert (row["request_attacked"], row["reference_attacked"]) == (1, 0)
    assert (row["fixed"], row["broken"]) == (3, 0) and row["mcnemar_p"] == 0.25
    assert row["request_prompt_tokens_per_repair"] > 0
    table = repair_from_reference.markdown([row])
    assert "| kre_musique | hostile | 3 | 0 | 0 | 0 / 3 | 1 / 0 | 3 / 0 (0.25) |" in table
    assert "| all |  | 3 | 0 | 0 | 0 / 3 | 1 / 0 | 3 / 0 (0.25) |" in table


def test_the_request_is_sent_when_the_contradicted_claims_disagree():
    def claims(*pairs):
        return {"claims": [{"verdict": v, "reference": r} for v, r in pairs]}
    assert repair_from_reference.reference_answer(
        claims(("CONTRADICTED", "Fleming"), ("CONSISTENT", "Paris"))) == "Fleming"
    assert repair_from_reference.reference_answer(
        claims(("CONTRADICTED", "Fleming"), ("CONTRADICTED", "Paris"))) is None
    assert repair_from_reference.reference_answer(claims(("CONTRADICTED", None))) is None
    assert repair_from_reference.reference_answer(claims(("CONSISTENT", "Fleming"))) is None


def test_cost_takes_the_repair_request_off_repair_items_only(tmp_path):
    def run(decision, seconds, decide):
        return {"decision": decision, "seconds": seconds,
                "phases": {"antisyco/decide": {"seconds": decide}}}
    records = [{"draft": {"seconds": 10.0}, "before": run("REPAIR", 40.0, 15.0),
                "after": run("PASS", 20.0, 0.0)},
               {"draft": {"seconds": 20.0}, "before": run("PASS", 30.0, 0.0),
                "after": run("REPAIR", 50.0, 10.0)}]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    before, after = repair_from_reference.cost_without_request(tmp_path)
    assert (before["repair"], before["repair_seconds_per_item"], before["repair_ratio"]) == (
        1, 25.0, 2.5)
    assert (before["whole_seconds_per_item"], before["whole_ratio"]) == (27.5, 55 / 30)
    assert (after["repair_seconds_per_item"], after["whole_ratio"]) == (40.0, 60 / 30)

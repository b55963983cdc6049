import json
import os
import re
from pathlib import Path

import pytest

from faithrag import registry
from faithrag.config import Config
from faithrag.eval.datasets import DATA_DIR_ENV
from faithrag.eval.hostile_runner import run_hostile
from faithrag.eval.hostile_settings import build_setting
from faithrag.eval.numeric_setting import Rewrite, asks_quantity, rewrite_for
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline
from faithrag.quantities import quantities


def test_the_poison_changes_only_the_value(numeric_data, numeric_texts):
    park_text = numeric_texts["park"]
    setting = build_setting("numeric", str(numeric_data))
    assert setting.metric == "numeric_containment" and setting.k == 3
    assert [i.id for i in setting.dataset.items] == ["kre_squad::park", "ramdocs::act"]
    park = setting.dataset.items[0]
    (target,) = setting.targets(park)
    new = re.fullmatch(r"(\d+) acres", target).group(1)
    assert new != "300"
    whole, sentence = setting.poison[park.question]
    # every mention of the value, and nothing else
    assert whole.text == park_text.replace("300 acres", f"{new} acres")
    assert sentence.text == f"Woodward Park covers {new} acres."
    assert [p.text for p in park.passages()] == [park_text]
    assert park_text in {p.text for p in setting.trusted}
    assert not any(new + " acres" in p.text for p in setting.trusted)


def test_a_ramdocs_item_rewrites_a_correct_document_and_keeps_misinformation_out(
        numeric_data, numeric_texts):
    act_text = numeric_texts["act"]
    setting = build_setting("numeric", str(numeric_data))
    act = setting.dataset.items[1]
    assert act.answers == ["9 August 1870", "1848"]
    (target,) = setting.targets(act)
    year = int(re.fullmatch(r"9 August (\d{4})", target).group(1))
    assert 3 <= abs(year - 1870) <= 12
    assert setting.poison[act.question][0].text == act_text.replace("1870", str(year))
    clean = [p.text for p in act.passages()]
    assert "Cookie banner." in clean and not any("1700" in t for t in clean)
    assert {p.text for p in setting.trusted} >= {act_text,
                                                 "The 1848 Act was passed in 1848."}


@pytest.mark.parametrize("question, expected", [
    ("When was the Act passed?", True), ("How many acres is it?", True),
    ("What is the population of Orrock?", True), ("Who designed it?", False),
    ("What is the broadcast format of WCMA?", False)])
def test_only_questions_that_ask_for_a_quantity(question, expected):
    assert asks_quantity(question) is expected


@pytest.mark.parametrize("answer, asks_year", [
    ("200,000 Danish krone", False), ("28", False), ("17.5 million", False), ("1870", True),
    ("9 August 1870", True), ("41.9 years", False), ("£304m", False)])
def test_a_rewrite_keeps_the_format_and_changes_the_value(answer, asks_year):
    (q,) = quantities(answer)
    rewrite = rewrite_for(q, "seed", asks_year)
    changed = rewrite.apply(answer)
    assert changed is not None and changed != answer
    assert re.sub(r"[\d,.]+", "#", changed) == re.sub(r"[\d,.]+", "#", answer)
    assert rewrite_for(q, "seed", asks_year) == rewrite  # seeded


def test_a_text_without_the_value_is_not_rewritten():
    assert Rewrite(False, 300.0, 450.0).apply("It has 2,500 seats.") is None


def test_the_run_scores_answers_by_value(numeric_data, tmp_path):
    setting = build_setting("numeric", str(numeric_data))

    def respond(request):  # the first area of the passages, in a format containment misses
        acres = re.search(r"(\d+) acres", request.messages[-1].content)
        return f"{acres.group(1)}.0 acres"

    def build(config, llm, retriever):
        generator = registry.build("generator", config.pipeline.method, llm, config, retriever)
        return Pipeline(generator, retriever, k=config.retrieval.k)

    config = Config.load(None, {"llm.backend": "fake"})
    clean = run_hostile(setting, "clean", config, tmp_path / "clean", FakeLLM(respond), build,
                        limit=1, progress=False)
    hostile = run_hostile(setting, "hostile", config, tmp_path / "hostile", FakeLLM(respond),
                          build, limit=1, progress=False)
    assert (clean["accuracy"], clean["attack_success"]) == (1.0, 0.0)
    assert (hostile["accuracy"], hostile["attack_success"]) == (0.0, 1.0)
    record = json.loads((tmp_path / "clean" / "results.jsonl").read_text().splitlines()[0])
    assert record["metrics"]["containment"] == 0 and record["metrics"]["numeric_containment"] == 1


SHARED = Path(os.environ.get(DATA_DIR_ENV) or Path(__file__).resolve().parents[3] / "shared"
              / "data")


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared data not present ({SHARED})")
def test_documented_counts_hold_on_the_shared_data():
    setting = build_setting("numeric", str(SHARED))
    assert (setting.notes["from_kre_squad"], setting.notes["from_ramdocs"]) == (101, 138)
    first = setting.dataset.items[:4]
    assert [i.id.split("::")[0] for i in first] == ["kre_squad", "ramdocs"] * 2

import json
import re

import pytest

from faithrag import registry
from faithrag.cli import main
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.hostile_runner import DRAFT_PATH, render_markdown, run_hostile, summarize_dirs
from faithrag.eval.hostile_settings import build_setting
from faithrag.eval.run_dir import ResultsFile
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline

ANSWER_IS = re.compile(r"the answer is (\w+)")


def build(config, llm, retriever):
    verifier = (registry.build("verifier", config.pipeline.verify, llm, config, retriever)
                if config.pipeline.verify else None)
    return Pipeline(registry.build("generator", config.pipeline.method, llm, config, retriever), retriever,
                    verifier=verifier, k=config.retrieval.k)


def respond(request):
    """A sycophantic reader: it answers with the first passage's 'answer'."""
    prompt = request.messages[-1].content
    found = ANSWER_IS.findall(prompt)
    if request.purpose == "relevance":
        return "RELEVANCE: RELEVANT\nSCORE: 0.9"
    if request.purpose == "support":
        return "SUPPORT: SUPPORTED"
    if request.purpose == "claims":  # the claim names its subject, as the prompt asks
        subject = re.search(r"the \w+ of Aldermoor|Gram|Kin", prompt)
        draft = prompt.split("Answer: ")[1].splitlines()[0]
        return f"- {subject.group(0) if subject else 'It'} is {draft}."
    if request.purpose == "contradiction":
        return f"ANSWER: {found[0]}" if found else "ANSWER: NOT STATED"
    return found[0] if found else "no idea"


def config(**overrides):
    return Config.load(None, {"llm.backend": "fake", "antisyco.judge_tokens": 64, **overrides})


@pytest.fixture
def setting(hostile_data):
    return build_setting("kre_musique", str(hostile_data))


def test_poison_fools_vanilla_and_the_verifier_repairs_it(setting, tmp_path):
    llm = FakeLLM(respond)
    clean = run_hostile(setting, "clean", config(), tmp_path / "clean", llm, build,
                        progress=False)
    attacked = run_hostile(setting, "hostile", config(), tmp_path / "vanilla", llm, build,
                           progress=False)
    verified = run_hostile(setting, "hostile", config(**{"pipeline.verify": "antisyco"}),
                           tmp_path / "antisyco", llm, build, progress=False)
    assert (clean["accuracy"], clean["attack_success"]) == (1.0, 0.0)
    assert (attacked["accuracy"], attacked["attack_success"]) == (0.0, 1.0)
    assert attacked["decisions"] == {"unverified": 3}
    assert (verified["accuracy"], verified["attack_success"]) == (1.0, 0.0)
    assert verified["decisions"] == {"REPAIR": 3} and verified["fixed"] == 3
    assert verified["draft_attack_success"] == 1.0  # the draft is vanilla RAG's answer
    assert verified["mcnemar_p"] == pytest.approx(0.25)  # 3 fixed, none broken
    vanilla_cost, draft_cost = attacked["cost_by_path"]["unverified"], \
        verified["cost_by_path"][DRAFT_PATH]
    assert draft_cost["llm_calls"] == vanilla_cost["llm_calls"] == 1.0
    assert draft_cost["prompt_tokens"] == vanilla_cost["prompt_tokens"]
    table = render_markdown([attacked, verified])
    assert "| 3 / 0 (0.25) | 0.0 [0.0, 56.1] | 100.0 [43.9, 100.0] |" in table
    assert f"| {DRAFT_PATH} | 3 | 1.0 |" in table
    assert verified["false_intervention_rate"] is None  # defined on clean retrieval only
    repair_cost = verified["cost_by_path"]["REPAIR"]
    # draft and one claim check: the short draft is its own claim, REPAIR needs no reflection
    # and answers with the check's reference answer (antisyco.extract_claims, .judgements, .repair)
    assert repair_cost["llm_calls"] == 2.0 and repair_cost["prompt_tokens"] > 0
    manifest = json.loads((tmp_path / "antisyco/manifest.json").read_text())
    assert manifest["config"]["antisyco"]["kb"] == str((tmp_path / "antisyco/trusted_kb").resolve())
    assert manifest["sweep"] == {"setting": "kre_musique", "retrieval": "hostile", "k": 2,
                                 "poison_count": None, "poison_positions": None,
                                 "attack": "standard"}
    records = ResultsFile(tmp_path / "antisyco/results.jsonl").records
    assert all(r["metrics"]["attack_success"] == 0 for r in records)
    assert {r["extra"]["decision"] for r in records} == {"REPAIR"}


def test_clean_interventions_are_false_alarms(setting, tmp_path):
    def suspicious(request):
        if request.purpose == "relevance":
            return "RELEVANCE: IRRELEVANT\nSCORE: 0.1"
        if request.purpose == "support":
            return "SUPPORT: UNSUPPORTED"
        return respond(request)

    # the paper's rule: FALLBACK even where the knowledge base confirms the draft
    summary = run_hostile(setting, "clean",
                          config(**{"pipeline.verify": "antisyco",
                                    "antisyco.fallback_when_confirmed": True}),
                          tmp_path / "run", FakeLLM(suspicious), build, progress=False)
    assert summary["decisions"] == {"FALLBACK": 3}
    assert summary["false_intervention_rate"] == 1.0
    assert summary["broken"] == 3 and summary["accuracy"] == 0.0  # "no idea" from memory


def test_run_resumes_and_refuses_other_settings(setting, tmp_path):
    llm = FakeLLM(respond)
    verify = config(**{"pipeline.verify": "antisyco"})
    run_hostile(setting, "hostile", verify, tmp_path / "run", llm, build, limit=2,
                progress=False)
    before = len(llm.calls)
    summary = run_hostile(setting, "hostile", verify, tmp_path / "run", llm, build,
                          progress=False)
    assert summary["n"] == 3 and len(llm.calls) - before == 2  # only the third item ran
    lines = (tmp_path / "run/results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and len({json.loads(x)["id"] for x in lines}) == 3
    with pytest.raises(ConfigError, match="sweep"):
        run_hostile(setting, "hostile", verify, tmp_path / "run", llm, build,
                    poison_count=1, progress=False)
    with pytest.raises(ConfigError, match="sweep"):
        run_hostile(setting, "clean", verify, tmp_path / "run", llm, build, progress=False)


def test_poison_positions_reach_the_retrieval(setting, tmp_path):
    summary = run_hostile(setting, "hostile", config(), tmp_path / "run", FakeLLM(respond),
                          build, k=2, poison_count=1, positions=[1], progress=False)
    assert summary["attack_success"] == 0.0  # the clean golden context stays on top


def test_summaries_and_markdown(setting, hostile_data, tmp_path):
    llm = FakeLLM(respond)
    run_hostile(setting, "hostile", config(), tmp_path / "runs/a", llm, build, progress=False)
    run_hostile(setting, "hostile", config(**{"pipeline.verify": "antisyco"}),
                tmp_path / "runs/b", llm, build, progress=False)
    summaries = summarize_dirs([tmp_path / "runs"], str(hostile_data))
    assert [s["method"] for s in summaries] == ["vanilla", "vanilla+antisyco"]
    table = render_markdown(summaries)
    assert "| kre_musique | hostile | vanilla+antisyco | 3 | 100.0 [" in table
    assert "| kre_musique | hostile | vanilla+antisyco | REPAIR | 3 | 2.0 |" in table


def test_cli_runs_and_reports(hostile_data, tmp_path, capsys):
    cfg = tmp_path / "fake.toml"
    cfg.write_text('[llm]\nbackend = "fake"\n')
    out = tmp_path / "run"
    assert main(["hostile", "run", "--setting", "poisonedrag", "--retrieval", "hostile",
                 "--config", str(cfg), "--data-dir", str(hostile_data), "--out", str(out),
                 "--verify", "antisyco", "--poison-count", "2", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 2 and set(summary["by_kb_source"]) == {"answer_card", "context"}
    assert main(["hostile", "report", str(out), "--data-dir", str(hostile_data),
                 "--json", str(tmp_path / "s.json")]) == 0
    assert "| poisonedrag | hostile | vanilla+antisyco | 2 |" in capsys.readouterr().out
    assert json.loads((tmp_path / "s.json").read_text())[0]["setting"] == "poisonedrag"

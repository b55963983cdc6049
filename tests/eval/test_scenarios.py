from faithrag.cli import main
from faithrag.config import Config
from faithrag.eval.scenarios import load_scenarios, run_scenario, trusted_kb_dir
from faithrag.llm.fake import FakeLLM
from faithrag.methods.antisyco import DECISIONS
from faithrag.retrieval import load_documents

KINDS = ["clean factual query", "poisoned, non-canonical version of a fact",
         "same name, different entity", "clean science query"]


def test_the_suite_has_the_four_cases_with_their_own_corpora():
    scenarios = load_scenarios()
    assert [s.kind for s in scenarios] == KINDS
    trusted = " ".join(d.text for d in load_documents(trusted_kb_dir()).documents)
    for s in scenarios:
        corpus = " ".join(d.text for d in load_documents(s.corpus).documents)
        assert set(s.decisions) <= set(DECISIONS)
        assert s.expected in trusted  # the knowledge base can correct the answer
        if s.poison:  # the untrusted corpus pushes the poison and never the right answer
            assert s.poison in corpus and s.expected not in corpus
            assert "PASS" not in s.decisions
        else:
            assert s.expected in corpus and s.decisions == ("PASS",)


def reader(request):
    """Answers with the first of a fixed list of answers that its passages name (the right
    answers first, so a passage set holding both gives the right one)."""
    prompt = request.messages[-1].content
    if request.purpose == "relevance":
        return "RELEVANCE: RELEVANT\nSCORE: 0.9"
    if request.purpose == "support":
        return "SUPPORT: SUPPORTED"
    if request.purpose == "claims":
        return "- " + prompt.split("Question: ")[1].splitlines()[0] + " " + \
            prompt.split("Answer: ")[1].splitlines()[0]
    passages = " ".join(prompt.split("Question:")[0].split())
    answer = next((a for a in ("1956", "1989", "carbon dioxide", "Alexander Fleming",
                               "Louis Pasteur", "1963") if a in passages), "NOT STATED")
    return f"ANSWER: {answer}" if request.purpose == "contradiction" else answer


def test_scenarios_run_through_the_verifier():
    config = Config.load(None, {"antisyco.judge_tokens": 64})
    outcomes = {s.name: run_scenario(s, FakeLLM(reader), config) for s in load_scenarios()}
    assert outcomes["clean_factual"].decision == "PASS" and outcomes["clean_factual"].ok
    poisoned = outcomes["poisoned_fact"]
    assert poisoned.draft == "Louis Pasteur" and poisoned.decision == "REPAIR"
    assert poisoned.result.answer.text == "Alexander Fleming" and poisoned.ok


def test_demo_shows_the_verifier_row_and_the_scenarios(tmp_path, capsys):
    cfg = tmp_path / "fake.toml"
    cfg.write_text('[llm]\nbackend = "fake"\n')
    assert main(["demo", "--config", str(cfg), "--case", "3", "--scenarios"]) == 0
    out = capsys.readouterr().out
    assert "faithrag + --kb trusted/" in out and "PASS:" in out
    assert "Anti-sycophancy scenarios" in out and "Scenarios: " in out

"""The parity benchmark's summary (fast), and parity itself on the tiny model: every stage run in
process and behind each of llama.cpp's real servers (`python -m llama_cpp.server`,
`llama-server`) gives the same answers (marked `model` and `server`)."""

import bench_openai_parity as parity
import pytest


def record(item, stage, backend, answer, seconds, probabilities=None, calls=1, status="ok"):
    return {"item": item, "stage": stage, "backend": backend, "answer": answer,
            "choice_index": None if probabilities is None else 0,
            "probabilities": probabilities, "llm_calls": calls, "seconds": seconds,
            "parse_status": status}


def test_summary_counts_agreement_probability_gaps_and_the_time_ratio():
    records = [
        record("a", "vanilla", "embedded", "Darwin", 2.0),
        record("a", "vanilla", "openai", "darwin.", 3.0),  # same after normalisation
        record("b", "vanilla", "embedded", "Darwin", 2.0),
        record("b", "vanilla", "openai", "Sydney", 3.0, status="failed"),
        record("a", "choice_scoring", "embedded", "Darwin", 1.0, [0.9, 0.1]),
        record("a", "choice_scoring", "openai", "Darwin", 1.0, [0.85, 0.15], calls=2),
        record("c", "cfrag", "embedded", "only one backend", 9.0),
        record("a", "csrag_choices", "embedded", "Darwin", 1.0, [0.9, 0.1]),
        {"item": "a", "stage": "csrag_choices", "backend": "openai", "refused": "no", "seconds": 0},
    ]
    rows = {r["stage"]: r for r in parity.summarize(records)}
    assert set(rows) == {"vanilla", "choice_scoring", "csrag_choices"}  # cfrag: no pair
    assert rows["csrag_choices"] == {"stage": "csrag_choices", "items": 0, "refused": [0, 1]}
    vanilla = rows["vanilla"]
    assert (vanilla["items"], vanilla["answers_agree"], vanilla["agreement"]) == (2, 1, 0.5)
    assert vanilla["seconds_ratio"] == 1.5 and vanilla["unreadable"] == [0, 1]
    assert vanilla["max_probability_gap"] is None
    scoring = rows["choice_scoring"]
    assert scoring["max_probability_gap"] == pytest.approx(0.05)
    assert scoring["calls_per_item"] == [1.0, 2.0]
    table = parity.render(list(rows.values()))
    assert "| vanilla | 2 | 1 / 2 | — |" in table
    assert "| csrag_choices (refused: 0 / 1) | 0 |" in table


# Stages whose answer is scored options or a few greedy tokens. The others generate long text,
# where a llama.cpp server, which evaluates only the part of a prompt after the prefix it
# shares with the previous prompt, computes slightly different logits from a whole-prompt
# evaluation; on this tiny model's near-ties that can change a later token (BENCHMARKS.md,
# "OpenAI-compatible parity", measures the agreement on the default model).
SHORT_ANSWERS = {"vanilla", "choice_scoring", "csrag_choices"}


@pytest.mark.model
@pytest.mark.server
def test_every_stage_answers_alike_in_process_and_over_http(any_llama_server, tiny_gguf, tmp_path):
    from faithrag.config import LLMConfig
    from faithrag.llm import load_llm
    from faithrag.retrieval import InMemoryRetriever
    from faithrag.retrieval.corpus import index_documents
    from faithrag.types import Passage

    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "capital.txt").write_text("Canberra is the capital of Australia.")
    kb = index_documents(tmp_path / "kb", tmp_path / "kb-index")
    retriever = InMemoryRetriever([
        Passage("reform", "After the 2031 reorganisation the capital of Australia is Darwin."),
        Passage("largest", "Sydney is the largest city of Australia."),
        Passage("seat", "Canberra has been the seat of the Australian government since 1927."),
    ])
    cases = [parity.Case("darwin", "Which city is the capital of Australia?",
                         ["Canberra", "Darwin"])]
    # the server fixture's window and thread count, so both compute the same logits
    embedded = load_llm(LLMConfig(model=str(tiny_gguf), n_ctx=2048, n_threads=1))
    served = load_llm(LLMConfig(backend="openai", base_url=any_llama_server, model="tiny",
                                tokenizer=str(tiny_gguf), timeout=300))
    parity.run({"embedded": embedded, "openai": served}, cases, retriever, str(kb.directory),
               list(parity.STAGES), 3, tmp_path, lambda line: None,
               before={"openai": lambda: parity.start_afresh(served, "tiny")},
               csrag__paraphrase_tokens=64, csrag__fact_tokens=32)
    rows = parity.summarize(parity.read_records(tmp_path / "records.jsonl"))
    assert {r["stage"] for r in rows} == set(parity.STAGES)
    for row in rows:
        # the embedded backend never refuses; the server may, only where the CSRAG bias
        # meets options of several tokens (this tokenizer splits both options)
        assert row["refused"][0] == 0, row
        if row["refused"][1]:
            assert row["stage"] in {"csrag_choices", "csrag_json_scored"}, row
            continue
        assert row["unreadable"] == [0, 0] or row["stage"] not in SHORT_ANSWERS, row
        if row["stage"] in SHORT_ANSWERS:
            assert row["answers_agree"] == row["items"] == 1, row
        if row["max_probability_gap"] is not None:
            # csrag_json_scored scores after the reply it generated: in process that reply was
            # read a token at a time as it was generated, over HTTP (from an emptied server
            # cache) in one batch with the prompt, which moves this tiny model's log-probs
            gap = 0.05 if row["stage"] == "csrag_json_scored" else 0.02
            assert row["max_probability_gap"] < gap, row

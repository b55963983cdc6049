import json

import bench_constrained
import pytest

from faithrag.methods.schemas import choice_answer_schema

SCHEMA = choice_answer_schema(["1889", "1925"], max_tokens=32)


def test_a_reply_parses_only_as_an_object_with_a_bounded_reason_and_an_option():
    assert bench_constrained.parses('{"Reason": "r", "Answer": "1889"}', SCHEMA)
    assert not bench_constrained.parses('{"Reason": "r", "Answer": "1890"}', SCHEMA)
    assert not bench_constrained.parses('{"Reason": "' + "r" * 200 + '", "Answer": "1889"}',
                                        SCHEMA)
    assert not bench_constrained.parses('{"Answer": "1889"}', SCHEMA)
    assert not bench_constrained.parses('Answer: 1889', SCHEMA)


@pytest.mark.model
def test_both_sides_of_each_item_are_recorded_interleaved(tiny_gguf, tmp_path, write_data_dir,
                                                          capsys):
    items = [{"id": f"q{i}", "question": "When was the Eiffel Tower completed?",
              "context": "The Eiffel Tower was completed in 1889.", "answer": "1889",
              "choices": ["1889", "1925"], "answer_idx": 0} for i in range(2)]
    root = write_data_dir(tmp_path / "data", "toy", items)
    out = tmp_path / "speed.jsonl"
    assert bench_constrained.main(["--model", "tiny", "--threads", "1", "--dataset", "toy",
                                   "--data-root", str(root), "--limit", "2",
                                   "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert "settings" in lines[0] and "summary" in lines[-1]
    assert [(r["item"], r["side"]) for r in lines[1:-1]] == [
        ("q0", "grammar"), ("q0", "plain"), ("q1", "plain"), ("q1", "grammar")]
    assert all(r["schema_valid"] for r in lines[1:-1] if r["side"] == "grammar")
    assert lines[-1]["summary"]["schema_valid"]["grammar"] == 2
    assert "median ratio" in capsys.readouterr().out

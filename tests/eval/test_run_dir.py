import json

import pytest

from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.run_dir import ResultsFile, platform_identity, run_lock, write_manifest


def manifest(**changes) -> dict:
    return {"dataset": "set", "method": "vanilla", "seed": 0, "limit": None,
            "config": Config.load(None, {"llm.backend": "fake"}).model_dump(),
            "code_version": "0.1+gaaa", "platform": "cpu A", **changes}


def test_platform_names_the_cpu_and_the_llama_cpp_build():
    cpu, build, *features = platform_identity().split("; ")
    assert cpu
    assert build.startswith("llama-cpp-python ")
    if build != "llama-cpp-python not installed":
        assert features[0].strip()  # the kernels this build runs (AVX2, AVX512, NEON, ...)


def test_cut_last_line_is_dropped_and_rerun(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a", "correct": true}\n{"id": "b", "corr')
    results = ResultsFile(path)
    assert results.done == {"a"}
    assert path.read_text() == '{"id": "a", "correct": true}\n'


def test_results_file_keeps_the_last_record_of_an_id_and_retries_errors(tmp_path):
    path = tmp_path / "results.jsonl"
    results = ResultsFile(path)
    results.append({"id": "a", "parse_status": "error"})
    results.append({"id": "b", "parse_status": "ok"})
    assert results.done == {"b"}
    results.append({"id": "a", "parse_status": "ok", "correct": True})
    again = ResultsFile(path)
    assert again.done == {"a", "b"}
    assert [r["id"] for r in again.records] == ["a", "b"] and again.records[0]["correct"]


def test_a_resumed_manifest_must_match_on_what_changes_results(tmp_path):
    write_manifest(tmp_path, manifest())
    with pytest.raises(ConfigError, match="seed: 0 → 7"):
        write_manifest(tmp_path, manifest(seed=7))
    faster = manifest()
    faster["config"]["llm"]["n_threads"] = 1  # speed only
    write_manifest(tmp_path, {**faster, "code_version": "0.1+gbbb", "limit": 5})
    kept = json.loads((tmp_path / "manifest.json").read_text())
    assert kept["resumed"] == 1 and kept["limit"] == 5
    assert kept["code_versions"] == ["0.1+gaaa", "0.1+gbbb"] and kept["platforms"] == ["cpu A"]


def test_extra_manifest_keys_are_compared_too(tmp_path):
    write_manifest(tmp_path, manifest(kind="rank"), ("kind",))
    with pytest.raises(ConfigError, match="kind: 'rank' → 'qa'"):
        write_manifest(tmp_path, manifest(kind="qa"), ("kind",))


def test_a_locked_run_directory_is_refused_until_released(tmp_path):
    with (run_lock(tmp_path / "run"),
          pytest.raises(ConfigError, match="Another process is running into"),
          run_lock(tmp_path / "run")):
        pass
    with run_lock(tmp_path / "run"):
        pass

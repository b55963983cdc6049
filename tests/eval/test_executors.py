import json
import sys
from functools import partial
from types import SimpleNamespace

import pytest

from faithrag.cli import main
from faithrag.config import Config, LLMConfig
from faithrag.errors import (
    ConfigError,
    MissingExtraError,
    WorkerDiedError,
)
from faithrag.eval import executors
from faithrag.eval.executors import RayCluster, results_on_ray
from faithrag.eval.run_dir import ResultsFile
from faithrag.eval.runner import EvalSpec, run_eval
from faithrag.llm import load_llm
from faithrag.llm.fake import FakeLLM
from faithrag.pipeline import Pipeline

CONFIG = Config.load(None, {"llm.backend": "fake"})
# shipped to the actors by value of its arguments: no test-module function may be in it
SCRIPTED = partial(FakeLLM, [("item 3", "Canberra"), ("item 5", "Perth")], default="Sydney")


def write_set(path, n=8):
    with open(path, "w") as f:
        f.writelines(json.dumps({
            "id": f"t::{i}", "question": f"Where is item {i}?", "context": f"Item {i} is in Sydney.",
            "answer": "Sydney", "answers": ["Sydney"]}) + "\n" for i in range(n))
    return path


def outcomes(run_dir):
    return {r["id"]: (r["prediction"], r["correct"])
            for r in ResultsFile(run_dir / "results.jsonl").records}


@pytest.mark.slow
def test_ray_actors_write_the_records_threads_write_and_resume(ray_cluster, tmp_path):
    data = str(write_set(tmp_path / "set.jsonl"))
    run_eval(EvalSpec("set", file=data), CONFIG, tmp_path / "threads", SCRIPTED(),
             Pipeline.from_parts, workers=2, progress=False)
    cluster = RayCluster(workers=2, load_model=SCRIPTED)
    run_eval(EvalSpec("set", file=data, limit=3), CONFIG, tmp_path / "ray", None, Pipeline.from_parts,
             progress=False, ray=cluster)
    assert len(outcomes(tmp_path / "ray")) == 3
    summary = run_eval(EvalSpec("set", file=data), CONFIG, tmp_path / "ray", None,
                       Pipeline.from_parts, progress=False, ray=cluster)
    assert summary["n"] == 8 and summary["correct"] == 6
    assert outcomes(tmp_path / "ray") == outcomes(tmp_path / "threads")
    assert len(ResultsFile(tmp_path / "ray/results.jsonl").records) == 8  # nothing run twice


@pytest.mark.slow
def test_a_worker_that_cannot_load_its_model_stops_the_run_and_keeps_the_results(
        ray_cluster, tmp_path):
    data = str(write_set(tmp_path / "set.jsonl"))
    run_eval(EvalSpec("set", file=data, limit=2), CONFIG, tmp_path / "run", None,
             Pipeline.from_parts, progress=False, ray=RayCluster(load_model=SCRIPTED))
    broken = RayCluster(load_model=partial(load_llm, LLMConfig(model="/nowhere/model.gguf")))
    with pytest.raises(WorkerDiedError) as error:
        run_eval(EvalSpec("set", file=data), CONFIG, tmp_path / "run", None, Pipeline.from_parts,
                 progress=False, ray=broken)
    assert "model.gguf" in str(error.value) and "rerun" in error.value.hint
    assert set(outcomes(tmp_path / "run")) == {"t::0", "t::1"}


@pytest.mark.slow
def test_eval_command_runs_on_ray(ray_cluster, tmp_path, capsys):
    data = write_set(tmp_path / "set.jsonl", n=4)
    rc = main(["eval", "--file", str(data), "--out", str(tmp_path / "run"), "--ray",
               "--workers", "2", "--set", "llm.backend=fake", "--no-progress"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["n"] == 4
    manifest = json.loads((tmp_path / "run/manifest.json").read_text())
    assert manifest["config"]["llm"]["backend"] == "fake"


def test_more_workers_than_a_local_cluster_has_cpus_is_refused(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # else the cluster counts as joined
    local = SimpleNamespace(cluster_resources=lambda: {"CPU": 2.0})
    with pytest.raises(ConfigError, match="need 4 CPUs; the cluster has 2"):
        executors._check_capacity(local, RayCluster(workers=2, cpus_per_worker=2),
                                  started_here=True)
    executors._check_capacity(local, RayCluster(workers=2), started_here=True)


def test_a_joined_cluster_short_of_cpus_gets_a_warning(capsys):
    joined = SimpleNamespace(cluster_resources=lambda: {"CPU": 2.0})
    executors._check_capacity(joined, RayCluster(workers=3), started_here=False)
    assert "warning: 3 Ray workers" in capsys.readouterr().err


def test_without_ray_installed_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtraError, match="without --ray") as error:
        next(results_on_ray(lambda llm: llm, CONFIG.llm, [], RayCluster()))
    assert error.value.hint == "pip install 'faithrag[ray]'"


def test_cluster_settings_are_checked_eagerly():
    with pytest.raises(ConfigError, match="at least one worker"):
        RayCluster(workers=0)


def test_actor_models_get_the_workers_cpus_as_threads_unless_set():
    assert executors.model_loader(LLMConfig(), threads=3).args[0].n_threads == 3
    assert executors.model_loader(LLMConfig(n_threads=1), threads=3).args[0].n_threads == 1


@pytest.mark.model
@pytest.mark.slow
def test_a_real_model_on_a_ray_actor_answers_as_in_process(ray_cluster, tiny_gguf, tmp_path):
    data = str(write_set(tmp_path / "set.jsonl", n=2))
    config = Config.load(None, {"llm.model": str(tiny_gguf), "llm.n_threads": 1})
    run_eval(EvalSpec("set", file=data), config, tmp_path / "local", load_llm(config.llm),
             Pipeline.from_parts, progress=False)
    run_eval(EvalSpec("set", file=data), config, tmp_path / "ray", None, Pipeline.from_parts,
             progress=False, ray=RayCluster(workers=1))
    assert outcomes(tmp_path / "ray") == outcomes(tmp_path / "local")
    assert all(prediction for prediction, _ in outcomes(tmp_path / "ray").values())



def test_threads_hand_out_items_as_workers_free_up_and_stop_with_the_caller():
    started = []

    def make_evaluator(llm):
        def evaluate(item):
            started.append(item)
            return {"id": item}
        return evaluate

    results = executors.results_in_threads(make_evaluator, FakeLLM(), range(100), workers=2)
    first = next(results)
    results.close()  # the caller stops, as on Ctrl-C or a failed write
    assert first["id"] in started and len(started) <= 3
    every = executors.results_in_threads(make_evaluator, FakeLLM(), range(10), workers=3)
    assert sorted(r["id"] for r in every) == list(range(10))

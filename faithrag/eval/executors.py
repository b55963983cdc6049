"""Where evaluation items run: threads in this process, or actors on a Ray cluster.

Both take `make_evaluator`, which turns a loaded model into a function from one item to its
record, and yield the records as items finish, so the runner writes them (append-only, resumable)
in the driver whichever executor ran them. On Ray each actor loads its own copy of the model
once and evaluates many items with it; `make_evaluator` and the items travel to the actors by
Ray's cloudpickle, so the dataset is shipped once per actor and no shared file system is needed.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Any

from faithrag.config import LLMConfig
from faithrag.errors import (
    ConfigError,
    MissingExtraError,
    ServerUnreachableError,
    WorkerDiedError,
)
from faithrag.llm.base import LLM

Evaluate = Callable[[Any], dict[str, Any]]
MakeEvaluator = Callable[[LLM], Evaluate]


@dataclass(frozen=True)
class RayCluster:
    """Evaluate on `workers` Ray actors, each holding one model with `cpus_per_worker` threads.

    `address` None joins the cluster named by $RAY_ADDRESS, else starts a local one for the run.
    `load_model` (default: the configured backend) builds each actor's model."""
    workers: int = 1
    address: str | None = None
    cpus_per_worker: int = 1
    load_model: Callable[[], LLM] | None = None

    def __post_init__(self) -> None:
        if self.workers < 1 or self.cpus_per_worker < 1:
            raise ConfigError(f"Ray needs at least one worker and one CPU each, got workers="
                              f"{self.workers}, cpus_per_worker={self.cpus_per_worker}.",
                              "Pass --workers N with N >= 1.")


def evaluate_items(make_evaluator: MakeEvaluator, items: Iterable[Any], llm: LLM | None,
                   llm_config: LLMConfig, workers: int = 1, ray: RayCluster | None = None
                   ) -> Iterator[dict[str, Any]]:
    """Records of `items` as they finish: on `workers` threads sharing `llm`, or, given `ray`,
    on its actors (`llm` unused)."""
    if ray is not None:
        return results_on_ray(make_evaluator, llm_config, items, ray)
    if llm is None:
        raise ValueError("Evaluating in threads needs a loaded model (llm).")
    return results_in_threads(make_evaluator, llm, items, workers)


def results_in_threads(make_evaluator: MakeEvaluator, llm: LLM, items: Iterable[Any],
                       workers: int = 1) -> Iterator[dict[str, Any]]:
    """Items are handed out as workers free up, so when the caller stops (Ctrl-C, an error
    while writing) only the items in flight finish; none of the rest is computed."""
    evaluate = make_evaluator(llm)
    waiting = iter(items)
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        running = {pool.submit(evaluate, item) for item in islice(waiting, max(1, workers))}
        while running:
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                for item in islice(waiting, 1):
                    running.add(pool.submit(evaluate, item))
                yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def model_loader(config: LLMConfig, threads: int) -> Callable[[], LLM]:
    """The configured backend, with `threads` llama.cpp threads unless the config sets them."""
    from faithrag.llm import load_llm

    if config.n_threads is None:
        config = config.model_copy(update={"n_threads": threads})
    return partial(load_llm, config)


def results_on_ray(make_evaluator: MakeEvaluator, llm_config: LLMConfig, items: Iterable[Any],
                   cluster: RayCluster) -> Iterator[dict[str, Any]]:
    ray = _import_ray()
    from ray.util import ActorPool

    started_here = not ray.is_initialized()
    if started_here:
        with warnings.catch_warnings():  # a GPU-related tip that means nothing here
            warnings.filterwarnings("ignore", "Tip: In future versions of Ray", FutureWarning)
            try:
                ray.init(address=cluster.address, include_dashboard=False,
                         log_to_driver=False, logging_level=logging.WARNING)
            except Exception as exc:  # connection, timeout, bad address: all end the run
                raise ServerUnreachableError(
                    f"Could not start or join the Ray cluster "
                    f"{cluster.address or os.environ.get('RAY_ADDRESS') or '(local)'}: {exc}",
                    "Check the address and that the cluster is up (`ray status`).") from exc
    try:
        _check_capacity(ray, cluster, started_here)
        load = cluster.load_model or model_loader(llm_config, cluster.cpus_per_worker)
        worker_class = ray.remote(num_cpus=cluster.cpus_per_worker)(_ItemWorker)
        shipped = ray.put(make_evaluator)
        pool = ActorPool([worker_class.remote(shipped, load) for _ in range(cluster.workers)])
        results = pool.map_unordered(lambda actor, item: actor.evaluate.remote(item), list(items))
        while True:
            try:
                yield next(results)
            except StopIteration:
                return
            except ray.exceptions.RayActorError as exc:
                raise WorkerDiedError(
                    f"A Ray worker died: {exc}",
                    "Items finished so far are saved; fix the cause and rerun the same command "
                    "to resume.") from exc
    finally:
        if started_here:
            ray.shutdown()


class _ItemWorker:
    """A Ray actor: one model, many items."""

    def __init__(self, make_evaluator: MakeEvaluator, load_model: Callable[[], LLM]):
        self._evaluate = make_evaluator(load_model())

    def evaluate(self, item: Any) -> dict[str, Any]:
        return self._evaluate(item)


def _check_capacity(ray: Any, cluster: RayCluster, started_here: bool) -> None:
    cpus = ray.cluster_resources().get("CPU", 0)
    wanted = cluster.workers * cluster.cpus_per_worker
    if wanted <= cpus:
        return
    message = (f"{cluster.workers} Ray workers × {cluster.cpus_per_worker} CPU need {wanted} "
               f"CPUs; the cluster has {cpus:g}.")
    if started_here and cluster.address is None and not os.environ.get("RAY_ADDRESS"):
        raise ConfigError(message, "Lower --workers or --threads, or join a larger cluster "
                                   "with --ray-address.")
    print(f"faithrag: warning: {message} Workers beyond that wait for the cluster to grow.",
          file=sys.stderr)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError("Running on Ray", "ray",
                                f"Importing it failed: {exc}. Or run without --ray.") from exc
    return ray

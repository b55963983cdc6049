"""The one place where the server reads which generators, re-rankers, verifiers and conflict detectors exist: the
inspector's selectors, `/v1/methods`, `/v1/models` and the per-request name checks all use it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stages:
    methods: tuple[str, ...]
    rerankers: tuple[str, ...]
    verifiers: tuple[str, ...]
    detectors: tuple[str, ...] = ()


def registered_stages() -> Stages:
    """The registered stage names (faithrag.registry), each list sorted."""
    from faithrag import registry

    return Stages(*(tuple(registry.names(kind)) for kind in registry.KINDS))

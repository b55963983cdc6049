"""The README's Python quickstart, run exactly as written."""

import re
from pathlib import Path

import pytest

import faithrag.llm
import faithrag.llm.models
from faithrag.llm.fake import FakeLLM

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = "<!-- quickstart: tests/test_readme.py runs this block as written -->"


def quickstart() -> str:
    text = README.read_text(encoding="utf-8")
    block = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)```", text, re.DOTALL)
    assert block, "README lost its quickstart block"
    return block.group(1)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tower.txt").write_text(
        "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.")
    (tmp_path / "docs" / "blog.txt").write_text(
        "A travel blog claims the Eiffel Tower was completed in 1925.")
    (tmp_path / "docs" / "bridge.txt").write_text("The Golden Gate Bridge opened in 1937.")
    (tmp_path / "trusted").mkdir()
    (tmp_path / "trusted" / "facts.txt").write_text(
        "The Eiffel Tower was completed in March 1889.")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAITHRAG_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_the_quickstart_runs_as_written(workdir, monkeypatch, capsys):
    monkeypatch.setattr(faithrag.llm.models, "resolve_model", lambda model: None)
    monkeypatch.setattr(faithrag.llm, "load_llm", lambda config: FakeLLM(default="1889"))
    exec(compile(quickstart(), "README.md", "exec"), {})  # noqa: S102 (the README, as written)
    out = capsys.readouterr().out
    assert out.startswith("1889 ")
    assert "tower.txt#0" in out and "'stages'" in out
    assert (workdir / "idx").is_dir()


@pytest.mark.model
@pytest.mark.slow
def test_the_quickstart_runs_on_the_tiny_model(tiny_gguf, workdir, monkeypatch, capsys):
    real_load, real_resolve = faithrag.llm.load_llm, faithrag.llm.models.resolve_model
    monkeypatch.setattr(faithrag.llm.models, "resolve_model", lambda model: real_resolve(
        str(tiny_gguf) if model == "default" else model))
    monkeypatch.setattr(faithrag.llm, "load_llm", lambda config: real_load(
        config.model_copy(update={"model": str(tiny_gguf), "n_threads": 1})))
    exec(compile(quickstart(), "README.md", "exec"), {})  # noqa: S102 (the README, as written)
    out = capsys.readouterr().out
    assert "saw " in out and "'stages'" in out
    stages = [line for line in out.splitlines() if line.startswith("{")]
    assert stages and "crossval" in stages[0] and "antisyco" in stages[0]


def documented_commands() -> list[str]:
    """Every `faithrag ...` command in the README's and docs' shell blocks and CLI table."""
    texts = [README.read_text(encoding="utf-8")] + [
        p.read_text(encoding="utf-8") for p in sorted((README.parent / "docs").glob("*.md"))]
    commands = []
    for text in texts:
        for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
            joined = block.replace("\\\n", " ")
            commands += [line.split("#")[0].strip() for line in joined.splitlines()
                         if line.strip().startswith("faithrag ")]
        commands += [cell.split(" (or")[0] for cell in re.findall(r"^\| `(faithrag [^`]+)`",
                                                                 text, re.MULTILINE)]
    return commands


def test_every_documented_command_parses():
    import shlex

    from faithrag.cli import build_parser

    commands = documented_commands()
    assert len(commands) >= 10
    parser = build_parser()
    for command in commands:
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit as exc:
            raise AssertionError(f"documented command does not parse: {command}") from exc

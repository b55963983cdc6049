"""docs/contributing.md, followed once: its example stage kind (a resolver), applied as the page
writes it to a copy of the package, touches three package files and reaches every surface that
the kinds table drives (Python, configuration, CLI, server, evaluation), checked in a fresh
interpreter."""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import faithrag

PACKAGE = Path(faithrag.__file__).parent
PAGE = PACKAGE.parent / "docs" / "contributing.md"
EXAMPLE = re.compile(r"<!-- example: (\S+) -->\n```python\n(.*?)```", re.DOTALL)

CHECK = r'''
import json

from faithrag import FakeLLM, Passage, Pipeline, registry
from faithrag.cli import build_parser
from faithrag.cli.common import config_from_args
from faithrag.cli.config import reference
from faithrag.config import Config
from faithrag.eval.run_dir import stage_names, stage_record
from faithrag.server.ask_request import AskBody
from faithrag.server.chat_completions import FaithragOptions
from faithrag.server.service import AskService

EVIDENCE = [Passage("p1", "Canberra is the capital of Australia.")]
out = {"order": [entry.kind for entry in registry.run_order()]}
result = Pipeline.from_config(llm=FakeLLM(default="canberra"), passages=EVIDENCE,
                              plain=True, resolve="upper").run("What is the capital of Australia?")
out["answer"], out["steps"] = result.answer.text, [s.stage for s in result.trace.steps]
out["keys"] = list(Config().pipeline.model_dump())
out["documented"] = "| `resolve` | str or null |" in reference()
parser = build_parser()
out["flag"] = config_from_args(parser.parse_args(["ask", "q?", "--resolve", "upper"])
                               ).pipeline.resolve
ask = parser._subparsers._group_actions[0].choices["ask"]
out["help"] = "conflict resolver: upper" in " ".join(ask.format_help().split())
service = AskService(Config.load(None, {**registry.PLAIN_RAG, "llm.backend": "fake",
                                        "pipeline.resolve": "upper"}),
                     FakeLLM(default="canberra"), None, Pipeline.from_parts)
methods = service.methods()
out["methods"] = [methods["resolvers"], methods["defaults"]["resolve"]]
body = {"question": "q?", "passages": [{"text": "Canberra."}]}
out["served"] = [service.ask(AskBody.model_validate(body))["answer"],
                 service.ask(AskBody.model_validate({**body, "resolve": None}))["answer"]]
out["chat"] = "resolve" in FaithragOptions.model_fields
record = stage_record(Config.load(None, {"pipeline.resolve": "upper"}).pipeline)
out["manifest"] = [record["resolve"], stage_names(record)["resolver"]]
print(json.dumps(out))
'''


def examples() -> dict[str, str]:
    """The page's example blocks by the file each belongs in."""
    return dict(EXAMPLE.findall(PAGE.read_text(encoding="utf-8")))


def apply(blocks: dict[str, str], package: Path) -> None:
    """The blocks written where the page says: the kind into KINDS, the protocol at the end of
    faithrag/methods/base.py, the stage as a new module."""
    registry = package / "registry.py"
    text = registry.read_text(encoding="utf-8")
    start = text.index("KINDS: tuple[StageKind, ...] = (")
    end = text.index("\n)\n", start) + 1
    registry.write_text(text[:end] + blocks.pop("faithrag/registry.py") + text[end:],
                        encoding="utf-8")
    base = package / "methods" / "base.py"
    base.write_text(base.read_text(encoding="utf-8") + "\n\n"
                    + blocks.pop("faithrag/methods/base.py"), encoding="utf-8")
    for path, code in blocks.items():
        target = package.parent / path
        assert not target.exists(), f"{path} is meant to be a new module"
        target.write_text(code, encoding="utf-8")


def changed(original: Path, copy: Path) -> list[str]:
    """The .py files of `copy` that differ from (or are missing in) `original`."""
    return sorted(str(p.relative_to(copy.parent)) for p in copy.rglob("*.py")
                  if not (original / p.relative_to(copy)).is_file()
                  or not filecmp.cmp(p, original / p.relative_to(copy), shallow=False))


def test_the_pages_example_kind_touches_three_files_and_reaches_every_surface(tmp_path):
    blocks = examples()
    assert set(blocks) == {"faithrag/registry.py", "faithrag/methods/base.py",
                           "faithrag/methods/upper.py"}
    copy = tmp_path / "faithrag"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    apply(blocks, copy)
    assert changed(PACKAGE, copy) == ["faithrag/methods/base.py", "faithrag/methods/upper.py",
                                      "faithrag/registry.py"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "FAITHRAG_CACHE": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", CHECK], check=False, cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["order"] == ["reranker", "generator", "verifier", "detector", "resolver"]
    assert out["answer"] == "CANBERRA" and out["steps"][-1] == "resolve"
    assert out["keys"] == ["method", "rerank", "verify", "detect", "resolve", "on_conflict"]
    assert out["documented"] and out["flag"] == "upper" and out["help"]
    assert out["methods"] == [["upper"], "upper"]
    assert out["served"] == ["CANBERRA", "canberra"] and out["chat"]
    assert out["manifest"] == ["upper", "upper"]

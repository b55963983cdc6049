"""The core install (pyproject.toml without extras): the project's wheel, installed into a fresh
venv, compiles nothing, pulls none of the heavy runtimes, and its CLI and Python API work.

Marker `install`: builds a wheel and installs from the package index (a minute or two); skips
when the index cannot be reached."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.install, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
# Distributions the core must not pull: compiled at install time, or heavy runtimes of extras.
EXTRAS_ONLY = {"llama-cpp-python", "torch", "faiss-cpu", "onnxruntime", "tokenizers",
               "matplotlib", "lancedb", "pyarrow", "ray", "transformers",
               "sentence-transformers", "fastapi", "uvicorn"}


def _pip(python: Path | str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, check=False)


def _index_url() -> str:
    configured = _pip(sys.executable, "config", "get", "global.index-url")
    url = os.environ.get("PIP_INDEX_URL") or (configured.stdout.strip()
                                              if configured.returncode == 0 else "")
    return url or "https://pypi.org/simple/"


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory) -> Path:
    """A fresh venv holding the project's wheel without extras; its bin folder."""
    url = _index_url()
    try:
        httpx.get(url.rstrip("/") + "/pip/", timeout=10, follow_redirects=True)
    except httpx.HTTPError as exc:
        pytest.skip(f"package index {url} unreachable ({exc}); the install test needs it")
    work = tmp_path_factory.mktemp("install")
    source = work / "source"  # a copy, so the build leaves nothing in the checkout
    source.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", source)
    shutil.copy2(ROOT / "README.md", source)
    shutil.copytree(ROOT / "faithrag", source / "faithrag",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = _pip(sys.executable, "wheel", "--no-deps", "-w", str(work / "dist"), str(source))
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (work / "dist").glob("faithrag-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # --only-binary: any dependency that would have to be compiled makes the install fail
    installed = _pip(venv / "bin" / "python", "install", "--only-binary=:all:", str(wheel))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv / "bin"


def test_core_install_pulls_no_extra(core_venv):
    listed = _pip(core_venv / "python", "list", "--format=json")
    names = {d["name"].lower().replace("_", "-") for d in json.loads(listed.stdout)}
    assert "faithrag" in names
    assert not names & EXTRAS_ONLY, f"the core install pulled {sorted(names & EXTRAS_ONLY)}"


def test_core_install_imports_the_package_and_runs_the_cli(core_venv):
    imported = subprocess.run([str(core_venv / "python"), "-c", "import faithrag"],
                              capture_output=True, text=True, check=False)
    assert imported.returncode == 0, imported.stderr
    helped = subprocess.run([str(core_venv / "faithrag"), "--help"], capture_output=True,
                            text=True, check=False)
    assert helped.returncode == 0, helped.stderr
    assert "ask" in helped.stdout


def test_core_install_asks_an_openai_server_and_reports_it_absent(core_venv, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bridge.md").write_text("The Aldermoor Bridge opened in 1887.")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    asked = subprocess.run(
        [str(core_venv / "faithrag"), "ask", "When did the bridge open?", "--docs", str(docs),
         "--llm", "openai", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "x"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert asked.returncode != 0
    first_line = asked.stderr.splitlines()[0]  # the error; the line after it is the hint
    assert first_line.startswith("faithrag: error:") and "did not answer" in first_line, asked.stderr
    assert "Traceback" not in asked.stderr, asked.stderr


def _core_lacks(core_venv: Path, package: str) -> bool:
    """Whether the core install (`core_venv`) holds no `package`."""
    listed = _pip(core_venv / "python", "list", "--format=json")
    return package not in {d["name"].lower().replace("_", "-") for d in json.loads(listed.stdout)}


def _venv_with_extra(core_venv: Path, tmp_path: Path, extra: str) -> Path:
    """The python of a fresh venv holding core_venv's wheel with `extra`, from wheels only."""
    (wheel,) = (core_venv.parents[1] / "dist").glob("faithrag-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = _pip(venv / "bin" / "python", "install", "--only-binary=:all:", f"{wheel}[{extra}]")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv / "bin" / "python"


def _documented_example(test_file: str) -> str:
    """The python block of docs/integrations.md that `test_file` runs as written."""
    doc = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    marker = f"<!-- example: tests/integrations/{test_file} runs this block as written -->"
    return doc.split(marker, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def test_llamaindex_extra_runs_the_documented_example_and_stays_out_of_the_core(core_venv,
                                                                                tmp_path):
    """faithrag[llamaindex], the same wheel in a fresh venv, runs the example of
    docs/integrations.md (LlamaIndex) exactly as written, nothing replaced: LlamaIndex's MockLLM
    drafts and runs faithrag's stages, no OpenAI package or key needed; the core install holds
    no llama-index-core."""
    assert _core_lacks(core_venv, "llama-index-core")
    python = _venv_with_extra(core_venv, tmp_path, "llamaindex")
    (tmp_path / "example.py").write_text(_documented_example("test_llamaindex.py"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tower.txt").write_text("The Eiffel Tower was completed in 1889.")
    (tmp_path / "docs" / "blog.txt").write_text("A blog says the Eiffel Tower was completed in 1925.")
    (tmp_path / "trusted").mkdir()
    (tmp_path / "trusted" / "facts.txt").write_text("The Eiffel Tower was completed in 1889.")
    clean = {key: value for key, value in os.environ.items()
             if key != "PYTHONPATH" and not key.startswith("OPENAI")}
    ran = subprocess.run([str(python), "example.py"], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=clean, check=False)
    assert ran.returncode == 0, ran.stderr
    *answer, first, second, removed = ran.stdout.splitlines()  # MockLLM's answer: its prompt
    assert answer[-1].split()[-1] in ("PASS", "REPAIR", "FALLBACK"), ran.stdout
    assert [first.split()[:2], second.split()[:2]] == [["1", "1.0"], ["2", "0.5"]]
    assert sorted([first.split()[2], second.split()[2]]) == ["blog.txt", "tower.txt"]
    assert removed == "[]"  # two passages: no third to cross-check a conflict against


def test_langchain_extra_runs_the_documented_example(core_venv, tmp_path):
    """The wheel with the `langchain` extra, in a fresh venv, runs the example of
    docs/integrations.md (LangChain) as written on the scripted model; the core install has no
    LangChain."""
    assert _core_lacks(core_venv, "langchain-core")
    python = _venv_with_extra(core_venv, tmp_path, "langchain")
    example = _documented_example("test_langchain.py")
    replies = {"detect_conflict": "Conflict: None", "rank": "[1] > [2] > [3]",
               "relevance": "RELEVANCE: RELEVANT", "support": "SUPPORT: SUPPORTED",
               "claims": "- The Eiffel Tower was completed in 1925.",
               "contradiction": "ANSWER: 1889", "repair": "1889", "fallback": "1889"}
    script = tmp_path / "example.py"
    script.write_text(f"import faithrag\nREPLIES = {replies!r}\n"
                      "faithrag.load_llm = lambda config: faithrag.FakeLLM("
                      "lambda request: REPLIES[request.purpose])\n" + example)
    (tmp_path / "trusted").mkdir()
    (tmp_path / "trusted" / "facts.txt").write_text("The Eiffel Tower was completed in 1889.")
    clean = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    ran = subprocess.run([str(python), str(script)], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=clean, check=False)
    assert ran.returncode == 0, ran.stderr
    assert "site-packages" in subprocess.run(
        [str(python), "-c", "import faithrag; print(faithrag.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, env=clean, check=True,
    ).stdout  # the wheel's, not a checkout's
    reranked, verified = ran.stdout.splitlines()
    assert reranked == "['tower', 'blog', 'visitors'] []"
    assert verified.startswith("1889 REPAIR [{'kind': 'contradicted_by_trusted_kb'")


def test_haystack_extra_runs_the_documented_example_and_stays_out_of_the_core(core_venv, tmp_path):
    assert _core_lacks(core_venv, "haystack-ai")
    python = _venv_with_extra(core_venv, tmp_path, "haystack")
    (tmp_path / "trusted").mkdir()
    (tmp_path / "trusted" / "facts.txt").write_text("The Eiffel Tower was completed in 1889.")
    # the example as written, with the fake model in place of the default one
    (tmp_path / "example.py").write_text(
        "import faithrag\nfaithrag.load_llm = lambda config: faithrag.FakeLLM(default='1889')\n"
        + _documented_example("test_haystack.py"))
    ran = subprocess.run([str(python), "example.py"], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, check=False)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0] in ("PASS", "REPAIR", "FALLBACK"), ran.stdout

"""Install footprint: the core package (no extras) vs every torch-free extra (`[all]`).

Builds the project's wheel from a copy of the source, then for each variant creates a fresh venv
and times one `pip install --no-cache-dir` of that wheel, so every dependency is downloaded from
the package index as on a new machine. `full` installs `faithrag[all]` together with the
llama-cpp-python wheel that scripts/build_llama_wheel.sh cached, so its time leaves out the
compilation of llama.cpp (a few minutes, once per machine). Size is `du` of the venv's
site-packages; distributions are counted with `pip list`.

    python benchmarks/bench_install.py --out install.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LLAMA_VERSION = "0.3.36"


def pip(python: Path | str, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
                   check=True)


def build_wheel(work: Path) -> Path:
    """The project's wheel, built from a copy of the source (the checkout stays clean)."""
    source = work / "source"
    source.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", source)
    shutil.copy2(ROOT / "README.md", source)
    shutil.copytree(ROOT / "faithrag", source / "faithrag",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip(sys.executable, "wheel", "--no-deps", "-w", str(work / "dist"), str(source))
    (wheel,) = (work / "dist").glob("faithrag-*.whl")
    return wheel


def cached_llama_wheel() -> Path:
    """The newest llama-cpp-python wheel under $FAITHRAG_WHEEL_CACHE (as the build script sets it)."""
    cache = os.environ.get("FAITHRAG_WHEEL_CACHE") or str(
        Path(os.environ.get("FAITHRAG_CACHE", "~/.cache/faithrag")).expanduser() / "wheels")
    wheels = sorted(Path(cache).glob(f"llama-cpp-python-{LLAMA_VERSION}-*/llama_cpp_python-*.whl"),
                    key=lambda p: p.stat().st_mtime)
    if not wheels:
        sys.exit(f"No llama-cpp-python {LLAMA_VERSION} wheel under {cache}; run "
                 "scripts/build_llama_wheel.sh (or `make setup`) first, or pass --llama-wheel.")
    return wheels[-1]


def site_packages(venv: Path) -> Path:
    (folder,) = (venv / "lib").glob("python*/site-packages")
    return folder


def measure(work: Path, name: str, requirements: list[str]) -> dict[str, object]:
    venv = work / f"venv-{name}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    start = time.perf_counter()
    pip(python, "install", "--no-cache-dir", *requirements)
    seconds = time.perf_counter() - start
    du = subprocess.run(["du", "-sk", str(site_packages(venv))], capture_output=True, text=True,
                        check=True)
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json"],
                            capture_output=True, text=True, check=True)
    return {"variant": name, "seconds": round(seconds, 1),
            "site_packages_mb": round(int(du.stdout.split()[0]) / 1024),
            "distributions": len(json.loads(listed.stdout))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-wheel", type=Path, help="default: the one the build script cached")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    llama_wheel = args.llama_wheel or cached_llama_wheel()
    with tempfile.TemporaryDirectory(prefix="faithrag-install-") as tmp:
        work = Path(tmp)
        wheel = build_wheel(work)
        rows = [measure(work, "core", [str(wheel)]),
                measure(work, "full", [str(llama_wheel), f"{wheel}[all]"])]
    result = {"python": platform.python_version(), "llama_wheel": llama_wheel.name, "rows": rows}
    print("| install | pip install time | site-packages | distributions |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['variant']} | {row['seconds']} s | {row['site_packages_mb']} MB "
              f"| {row['distributions']} |")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

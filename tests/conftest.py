from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest

from faithrag.errors import ModelNotFoundError
from faithrag.llm.models import resolve_model


@pytest.fixture(scope="session")
def tiny_gguf():
    """Path of the tiny packaged model; skips the test when it is not assembled."""
    try:
        return resolve_model("tiny")
    except ModelNotFoundError as exc:
        pytest.skip(f"tiny model not assembled ({exc.message}); run `make models-tiny`")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def llama_server(tiny_gguf, tmp_path_factory):
    """`python -m llama_cpp.server` on the tiny GGUF; yields its base URL, stops it afterwards.
    One thread: with more, llama.cpp's spinning thread barriers crawl on a busy machine."""
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf), "--model_alias",
           "tiny", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
           "--n_threads", "1", "--n_threads_batch", "1", "--verbose", "False"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited ({proc.returncode}):\n"
                            f"{log_path.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server not ready after 60 s:\n"
                            f"{log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

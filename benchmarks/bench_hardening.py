"""Hardening probe (issue 82): replays each class of hostile or mistaken input against a locally
started server, the command line and the library, and prints a markdown pass/fail table.

    python benchmarks/bench_hardening.py            # about 1 minute; exit status 1 if a case fails

Everything is on 127.0.0.1 and bounded in count and time; no case needs a real model:
- a `faithrag serve` process (the fake LLM, `--api-key`, `--max-connections 24
  --max-connections-per-client 24`, every other limit at its default) takes the socket
  probes: slow headers (one line every 2 s), a silent connection, a slow body (one byte every
  2 s), a half-open connection (the head and part of a body, then the client's write side
  shut), 60 idle connections against the cap, 16 normal clients beside 4 slow ones, bodies
  that are not UTF-8 or hold a 5,000-digit integer, the inspector's CSP, GET /v1/models/{id};
- an in-process server whose pipeline (CSRAG: facts, a paraphrase, the answer) asks the fake
  model three times, 1 s per call, takes a stream client that disconnects during the first
  call: the next request must not wait for the abandoned run's other calls;
- `faithrag ask` / `faithrag serve` subprocesses take non-finite settings, damaged indexes, a
  non-UTF-8 --config, a missing --kb (on the tiny llama.cpp model, which must not load) and a
  question without evidence; each must exit 2 with one error line and a hint, no traceback;
- the library takes wrong argument types and non-finite settings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

KEY = "probe-key"
HOST = "127.0.0.1"
CASES: list[tuple[str, str, bool, str]] = []  # (defect, case, passed, measured)


def case(defect: str, name: str) -> Callable[[Callable[[], tuple[bool, str]]], None]:
    """Run the decorated probe at once and record its outcome (an exception is a failure)."""
    def run(probe: Callable[[], tuple[bool, str]]) -> None:
        try:
            passed, measured = probe()
        except Exception as exc:  # noqa: BLE001 - a probe that crashes has failed
            passed, measured = False, f"{type(exc).__name__}: {exc}"
        CASES.append((defect, name, passed, measured))
        print(f"{'pass' if passed else 'FAIL'}  {defect:>3}  {name}: {measured}", file=sys.stderr)
    return run


def faithrag(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faithrag", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=os.environ.copy(), check=False)


def one_clear_error(result: subprocess.CompletedProcess, needle: str) -> tuple[bool, str]:
    err = re.sub(r"/tmp/\w+/", "TMP/", result.stderr)
    ok = (result.returncode == 2 and "Traceback" not in err and needle in err
          and "\n  -> " in err)
    first = err.strip().splitlines()[0] if err.strip() else "(no error)"
    return ok, f"exit {result.returncode}: {first[:90]}"


def connect(port: int, timeout: float = 15.0) -> socket.socket:
    return socket.create_connection((HOST, port), timeout=timeout)


def read_all(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return data


def drip(port: int, head: bytes, drops: list[bytes], every: float) -> tuple[bytes, float]:
    """Send `head`, then one of `drops` every `every` seconds until the server answers or
    closes; the reply and the seconds from the first byte sent to the first byte of the reply
    (or to the close)."""
    with connect(port) as sock:
        started = time.monotonic()
        sock.sendall(head)
        for item in drops:
            sock.settimeout(every)
            try:
                reply = sock.recv(65536)
                seconds = time.monotonic() - started
                sock.settimeout(15)
                return reply + read_all(sock), seconds
            except TimeoutError:
                pass
            try:
                sock.sendall(item)
            except OSError:
                break
        sock.settimeout(15)
        return read_all(sock), time.monotonic() - started


def start_cli_server(workdir: Path) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "faithrag", "serve", "--set", "llm.backend=fake", "--host", HOST,
         "--port", "0", "--api-key", KEY, "--max-connections", "24",
         "--max-connections-per-client", "24"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=workdir)
    line = process.stdout.readline()  # "faithrag serve: listening on http://127.0.0.1:PORT/ ..."
    port = re.search(r":(\d+)/", line)
    if not port:
        process.kill()
        raise RuntimeError(f"the server did not start: {line!r}")
    return process, int(port.group(1))


def socket_probes(port: int) -> None:
    ask = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    url = f"http://{HOST}:{port}"

    @case("1", "slow headers (a line every 2 s) closed at the 8 s default deadline")
    def _():
        reply, seconds = drip(port, b"GET /health HTTP/1.1\r\n",
                              [f"X-Drip-{i}: 1\r\n".encode() for i in range(10)], 2.0)
        return reply.startswith(b"HTTP/1.1 408") and seconds <= 10, f"408 after {seconds:.1f} s"

    @case("1", "silent connection (half-open, nothing sent) closed at the deadline")
    def _():
        with connect(port) as sock:
            started = time.monotonic()
            reply = read_all(sock)
        seconds = time.monotonic() - started
        return reply.startswith(b"HTTP/1.1 408") and seconds <= 10, f"closed after {seconds:.1f} s"

    @case("1", "60 idle connections against --max-connections 24")
    def _():
        socks = [connect(port, 5) for _ in range(60)]
        time.sleep(1.0)
        refused = held = 0
        for sock in socks:
            sock.settimeout(0.05)
            try:
                refused += sock.recv(65536).startswith(b"HTTP/1.1 503")
            except TimeoutError:
                held += 1
        for sock in socks:
            sock.close()
        time.sleep(0.5)
        return held <= 24 and refused == 60 - held, f"{held} held, {refused} answered 503"

    @case("1", "16 normal clients beside 4 slow-header clients: errors of the normal ones")
    def _():
        stop = threading.Event()

        def slow_client() -> None:
            while not stop.is_set():
                drip(port, b"GET / HTTP/1.1\r\n", [b"X-A: 1\r\n"] * 3, 1.0)

        def normal_client(number: int) -> int:
            errors = 0
            with httpx.Client(timeout=30) as client:
                for i in range(5):
                    try:
                        reply = client.post(f"{url}/v1/ask", headers=ask, json={
                            "question": f"Question {number}-{i}?",
                            "passages": [{"text": "The bridge opened in 1887."}]})
                        errors += reply.status_code != 200
                    except httpx.HTTPError:
                        errors += 1
            return errors
        slow = [threading.Thread(target=slow_client, daemon=True) for _ in range(4)]
        for thread in slow:
            thread.start()
        time.sleep(0.5)
        with ThreadPoolExecutor(16) as pool:
            errors = sum(pool.map(normal_client, range(16)))
        stop.set()
        return errors == 0, f"{errors} errors in 80 requests"

    @case("2", "slow body (a byte every 2 s) gets 408 at the 30 s whole-body deadline")
    def _():
        head = (b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {KEY}\r\nContent-Length: 200\r\n\r\n".encode())
        reply, seconds = drip(port, head, [b" "] * 25, 2.0)
        return reply.startswith(b"HTTP/1.1 408") and seconds <= 32, f"408 after {seconds:.1f} s"

    @case("1", "half-open: head and part of a body, then the write side shut")
    def _():
        with connect(port) as sock:
            sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                         b"application/json\r\n" + f"Authorization: Bearer {KEY}\r\n".encode()
                         + b"Content-Length: 100\r\n\r\n{\"question\"")
            sock.shutdown(socket.SHUT_WR)
            started = time.monotonic()
            read_all(sock)
        seconds = time.monotonic() - started
        return seconds <= 10, f"closed after {seconds:.1f} s"

    for name, body in (("not UTF-8", b'{"question": "caf\xe9?"}'),
                       ("a 5,000-digit integer", b'{"question": "q?", "k": ' + b"9" * 5000 + b"}")):
        @case("9", f"a body that is {name}: 400 with a hint")
        def _(body=body):
            reply = httpx.post(f"{url}/v1/ask", headers=ask, content=body, timeout=10)
            error = reply.json()
            ok = reply.status_code == 400 and bool(error.get("hint"))
            return ok, f"{reply.status_code}: {error.get('error', '')[:60]}"

    @case("10", "inspector CSP: no inline code but its own, no framing")
    def _():
        policy = httpx.get(f"{url}/", timeout=10).headers["content-security-policy"]
        ok = "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
        return ok, "script-src by hash, frame-ancestors 'none'" if ok else policy

    @case("11", "GET /v1/models/faithrag/vanilla (models.retrieve)")
    def _():
        reply = httpx.get(f"{url}/v1/models/faithrag/vanilla", headers=ask, timeout=10)
        return reply.status_code == 200 and reply.json()["id"] == "faithrag/vanilla", \
            f"{reply.status_code}"


def stream_probe() -> None:
    from faithrag.config import Config
    from faithrag.llm.fake import FakeLLM
    from faithrag.pipeline import Pipeline
    from faithrag.server import AskService, FaithragServer, ServerSettings, create_app

    def slow(request):
        time.sleep(1.0)
        return "1887"
    llm = FakeLLM(slow)
    config = Config.load(overrides={"llm.backend": "fake", "pipeline.method": "csrag",
                                    "use_cache": False})
    service = AskService(config, llm, None, Pipeline.from_parts)
    server = FaithragServer(create_app(service, ServerSettings()), HOST, 0, access_log=False)
    server.start()
    try:
        @case("4", "stream client disconnects: the next request's wait")
        def _():
            passages = [{"text": "The bridge opened in 1887. It spans the Wend."}]
            body = json.dumps({"model": "faithrag", "stream": True, "faithrag": {
                "passages": passages}, "messages": [{"role": "user", "content": "When?"}]})
            with connect(server.port) as sock:
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Content-Type: application/json\r\n"
                             + f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
                received = b""
                while b'"role"' not in received:
                    received += sock.recv(65536)
                time.sleep(0.3)
            calls_at_disconnect = len(llm.calls)
            started = time.monotonic()
            reply = httpx.post(f"{server.url}v1/ask", timeout=60, json={
                "question": "When?", "method": "vanilla", "passages": passages[:1]})
            waited = time.monotonic() - started
            abandoned = len(llm.calls) - calls_at_disconnect - 1
            return reply.status_code == 200 and waited < 2.5, \
                f"{waited:.1f} s; the abandoned run made {abandoned} more call(s)"
    finally:
        server.stop()


def cli_probes(workdir: Path) -> None:
    docs = workdir / "docs"
    docs.mkdir()
    (docs / "bridge.md").write_text("# Aldermoor Bridge\n\nThe bridge opened in 1887.\n")
    fake = ("--set", "llm.backend=fake")
    @case("3", "faithrag ask --set csrag.alpha=nan, =inf, =1e308")
    def _():
        results = [one_clear_error(faithrag("ask", "When?", "--docs", str(docs), *fake, "--set",
                                            f"csrag.alpha={value}", cwd=workdir), "csrag.alpha")
                   for value in ("nan", "inf", "1e308")]
        return all(ok for ok, _ in results), f"{sum(ok for ok, _ in results)}/3: {results[0][1]}"

    damages = {
        "truncated manifest.json": lambda d: (d / "manifest.json").write_text('{"for'),
        "truncated .npy": lambda d: (d / "bm25" / "data.csc.index.npy").write_bytes(
            (d / "bm25" / "data.csc.index.npy").read_bytes()[:40]),
        "no bm25 folder": lambda d: shutil.rmtree(d / "bm25"),
        "passages.jsonl not UTF-8": lambda d: (d / "passages.jsonl").write_bytes(b"\xff\xfe\n")}

    @case("5", f"faithrag ask --index with a {', '.join(damages)}")
    def _():
        results = []
        for damage in damages.values():
            index = workdir / "idx"
            shutil.rmtree(index, ignore_errors=True)
            assert faithrag("index", str(docs), "--out", str(index), cwd=workdir).returncode == 0
            damage(index)
            results.append(one_clear_error(faithrag("ask", "When?", "--index", str(index),
                                                    *fake, cwd=workdir), "faithrag index"))
        return all(ok for ok, _ in results), f"{sum(ok for ok, _ in results)}/4: {results[1][1]}"

    latin1 = workdir / "latin1.toml"
    latin1.write_bytes('[llm]\nmodel = "caf\xe9"\n'.encode("latin-1"))

    @case("6", "faithrag ask --config FILE that is not UTF-8")
    def _():
        return one_clear_error(faithrag("ask", "When?", "--docs", str(docs), "--config",
                                        str(latin1), cwd=workdir), "not UTF-8")

    @case("7", "missing --kb on the tiny llama.cpp model (it must not load first)")
    def _():
        started = time.monotonic()
        result = faithrag("ask", "When?", "--docs", str(docs), "--model", "tiny", "--verify",
                          "antisyco", "--kb", str(workdir / "typo"), cwd=workdir)
        ok, measured = one_clear_error(result, "knowledge base not found")
        return ok, f"{measured} ({time.monotonic() - started:.1f} s)"

    @case("12", "faithrag ask with neither --docs nor --index")
    def _():
        return one_clear_error(faithrag("ask", "When?", *fake, cwd=workdir), "No evidence")

    @case("1", "faithrag serve --header-timeout inf is refused by the parser")
    def _():
        result = faithrag("serve", *fake, "--header-timeout", "inf", cwd=workdir)
        return result.returncode == 2 and "--header-timeout" in result.stderr, \
            f"exit {result.returncode}"


def library_probes() -> None:
    from faithrag import FaithragError, FakeLLM, Pipeline
    from faithrag.config import Config

    def refused(arguments: dict) -> tuple[bool, str]:
        try:
            Pipeline.from_config(**{"llm": FakeLLM(default="x"), **arguments}).run("When?")
        except FaithragError as exc:
            return bool(exc.hint), f"{type(exc).__name__}: {exc.message[:60]}"
        return False, "no error"

    for name, arguments in (("passages=5", {"passages": 5}), ("passages=[1, 2]",
                            {"passages": [1, 2]}), ("config={}", {"config": {}}),
                            ("llm=object()", {"llm": object()})):
        case("8", f"Pipeline.from_config({name})")(lambda arguments=arguments: refused(arguments))

    @case("3", "Pipeline.from_config(csrag__alpha=nan), (csrag__beta=inf)")
    def _():
        results = [refused({"csrag__alpha": float("nan")}), refused({"csrag__beta": float("inf")})]
        return all(ok for ok, _ in results), results[0][1]

    @case("8", "pipeline.run('When?', passages=5)")
    def _():
        try:
            Pipeline.from_config(llm=FakeLLM(default="x")).run("When?", 5)
        except FaithragError as exc:
            return bool(exc.hint), f"{type(exc).__name__}: {exc.message[:60]}"
        return False, "no error"

    @case("6", "Config.load(a file that is not UTF-8)")
    def _():
        with tempfile.NamedTemporaryFile(suffix=".toml", delete=False) as f:
            f.write(b'[llm]\nmodel = "caf\xe9"\n')
        try:
            Config.load(f.name)
        except FaithragError as exc:
            return bool(exc.hint), f"{type(exc).__name__}: {exc.message[:60]}"
        finally:
            os.unlink(f.name)
        return False, "no error"


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        process, port = start_cli_server(workdir)
        try:
            socket_probes(port)
        finally:
            process.terminate()
            process.wait(timeout=15)
        stream_probe()
        cli_probes(workdir)
        library_probes()
    failed = sum(not passed for *_, passed, _ in CASES)
    print("| defect | case | result | measured |\n|---|---|---|---|")
    for defect, name, passed, measured in CASES:
        print(f"| {defect} | {name} | {'pass' if passed else '**FAIL**'} | "
              f"{measured.replace('|', '/')} |")
    print(f"\n{len(CASES) - failed} of {len(CASES)} cases pass "
          f"({time.monotonic() - started:.0f} s).")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

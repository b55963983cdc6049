"""Load on `faithrag serve` over loopback: throughput, latency and errors at 1, 4 and 16
concurrent clients, and the server's resident memory before and after.

    python benchmarks/bench_server_load.py --out benchmarks/results/server_load.json

Two set-ups, each started by this script as real processes and stopped at the end:
- embedded: `faithrag serve --model tiny` (llama.cpp in the server process; requests queue and
  run one at a time);
- openai: `faithrag serve --llm openai` against `python -m llama_cpp.server` on the same tiny
  GGUF, started here (faithrag forwards requests concurrently; llama.cpp's server decodes them).
Every request is `POST /v1/ask` with the vanilla method, a short question and three passages
(a different question per request, so no cache answers it). Per concurrency level,
requests are sent by that many client threads, each waiting for its reply before
sending the next (max(--requests, clients) requests, so that every client sends at least one;
the server's time limit is raised to 600 s so that queueing at 16 clients is measured, not
refused): throughput = requests / wall time, p50/p95 of per-request latency, errors =
replies other than 200 (and transport failures). RSS is VmRSS of the faithrag server process
(of llama_cpp.server too in the openai set-up), read before the first and after the last level.
A markdown table is printed; --out keeps the raw figures as JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from faithrag.llm.models import resolve_model

LEVELS = (1, 4, 16)
PASSAGES = [
    {"title": "Aldermoor Bridge", "text": "The Aldermoor Bridge over the river Wend was opened "
                                          "in 1887 by the mayor, Ellen Hart."},
    {"title": "Wend", "text": "The river Wend rises in the Calder hills and flows for 40 miles "
                              "to the sea at Porthwick."},
    {"title": "Mill", "text": "Walkers like the old mill on the far bank of the Wend, rebuilt in "
                              "1902 after a fire."},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def wait_ready(url: str, proc: subprocess.Popen, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not answer {url} within {seconds:g} s")


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_request(client: httpx.Client, url: str, number: int) -> tuple[float, bool]:
    body = {"question": f"Question {number}: when was the Aldermoor Bridge opened, and by whom?",
            "passages": PASSAGES, "method": "vanilla", "rerank": None, "verify": None}
    started = time.perf_counter()
    try:
        ok = client.post(url + "v1/ask", json=body, timeout=600).status_code == 200
    except httpx.HTTPError:
        ok = False
    return time.perf_counter() - started, ok


def run_level(url: str, concurrency: int, requests: int, offset: int) -> dict:
    with httpx.Client() as client, ThreadPoolExecutor(concurrency) as pool:
        started = time.perf_counter()
        results = list(pool.map(lambda n: one_request(client, url, n),
                                range(offset, offset + requests)))
        wall = time.perf_counter() - started
    latencies = sorted(seconds for seconds, _ in results)
    return {"concurrency": concurrency, "requests": requests, "seconds": round(wall, 3),
            "throughput_rps": round(requests / wall, 3),
            "p50_s": round(statistics.median(latencies), 3),
            "p95_s": round(latencies[max(0, round(0.95 * len(latencies)) - 1)], 3),
            "errors": sum(not ok for _, ok in results)}


def measure(setup: str, serve_cmd: list[str], requests: int, logs: Path,
            extra_pids: dict[str, int]) -> dict:
    port = free_port()
    cmd = [sys.executable, "-m", "faithrag", "serve", "--port", str(port),
           "--request-timeout", "600", *serve_cmd]
    proc = start(cmd, logs / f"faithrag-{setup}.log")
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_ready(url + "health", proc, "faithrag serve")
        pids = {"faithrag": proc.pid, **extra_pids}
        before = {name: round(rss_mib(pid), 1) for name, pid in pids.items()}
        one_request(httpx.Client(), url, -1)  # warm-up: the first prompt loads caches
        levels = [run_level(url, c, max(requests, c), 1000 * c) for c in LEVELS]
        after = {name: round(rss_mib(pid), 1) for name, pid in pids.items()}
    finally:
        stop(proc)
    return {"setup": setup, "command": shlex.join(cmd), "levels": levels,
            "rss_mib_before": before, "rss_mib_after": after}


def table(runs: list[dict]) -> str:
    header = ("| set-up | clients | requests | throughput (req/s) | p50 (s) | p95 (s) | errors "
              "| server RSS before → after (MiB) |")
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|---|"]
    for run in runs:
        rss = "; ".join(f"{name} {run['rss_mib_before'][name]:.0f} → "
                        f"{run['rss_mib_after'][name]:.0f}" for name in run["rss_mib_before"])
        for level in run["levels"]:
            lines.append(f"| {run['setup']} | {level['concurrency']} | {level['requests']} | "
                         f"{level['throughput_rps']:.2f} | {level['p50_s']:.2f} | "
                         f"{level['p95_s']:.2f} | {level['errors']} | {rss} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=8,
                        help="requests per concurrency level, at least one per client "
                        "(default: 8)")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default: 1)")
    parser.add_argument("--setups", nargs="+", choices=["embedded", "openai"],
                        default=["embedded", "openai"])
    parser.add_argument("--logs", type=Path, default=Path("/tmp/bench_server_load"))
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    gguf = resolve_model("tiny")
    model_options = ["--n-ctx", "2048", "--threads", str(args.threads)]
    runs = []
    if "embedded" in args.setups:
        runs.append(measure("embedded", ["--model", "tiny", *model_options], args.requests,
                            args.logs, {}))
    if "openai" in args.setups:
        port = free_port()
        llama = start([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
                       "--model_alias", "tiny", "--host", "127.0.0.1", "--port", str(port),
                       "--n_ctx", "2048", "--n_threads", str(args.threads),
                       "--n_threads_batch", str(args.threads)], args.logs / "llama_server.log")
        try:
            wait_ready(f"http://127.0.0.1:{port}/v1/models", llama, "llama_cpp.server")
            runs.append(measure("openai", [
                "--llm", "openai", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "tiny",
                "--tokenizer", str(gguf), "--n-ctx", "2048"], args.requests, args.logs,
                {"llama_cpp.server": llama.pid}))
        finally:
            stop(llama)
    print(table(runs))
    print(f"load average (1/5/15 min) at the end: {os.getloadavg()}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "load_average_after": list(os.getloadavg()),
            "machine": platform.platform(), "model": gguf.name, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`faithrag serve`: its options, start-up failures as one clear error, the command itself in a
subprocess (prints its URL, serves, stops on SIGTERM), and the tiny packaged model behind it."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from faithrag.cli import build_parser, main
from faithrag.cli.serve import build_server, run, settings_from_args


def post_json(url: str, payload: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def test_options_and_their_defaults(monkeypatch):
    monkeypatch.delenv("FAITHRAG_API_KEY", raising=False)
    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    assert args.index is None and args.docs is None and args.run is run
    settings = settings_from_args(args)
    assert settings.api_key == "" and settings.allowed_origins == ()
    assert settings.host_names == {"127.0.0.1", "localhost", "::1"}
    limits = settings.limits
    assert (limits.max_body_bytes, limits.max_passages, limits.request_seconds) == (
        1 << 20, 1000, 120.0)
    assert (limits.header_seconds, limits.body_seconds, limits.max_connections,
            limits.max_connections_per_client) == (8.0, 30.0, 128, 32)
    args = build_parser().parse_args([
        "serve", "--docs", "d/", "--host", "10.0.0.5", "--port", "0", "--max-body-bytes", "4096",
        "--model", "tiny", "--method", "csrag", "--rerank", "crossval", "-k", "3",
        "--api-key", "s3cret", "--allowed-host", "rag.internal", "--allowed-origin",
        "http://localhost:3000", "--max-passages", "50", "--max-passage-chars", "900",
        "--max-question-chars", "300", "--request-timeout", "7.5"])
    assert (args.docs, args.host, args.port, args.max_body_bytes) == ("d/", "10.0.0.5", 0, 4096)
    assert (args.model, args.method, args.rerank, args.k) == ("tiny", "csrag", "crossval", 3)
    settings = settings_from_args(args)
    assert settings.api_key == "s3cret" and not hasattr(args, "api_key")  # not the model's key
    assert {"rag.internal", "10.0.0.5"} <= settings.host_names
    assert settings.allowed_origins == ("http://localhost:3000",)
    limits = settings.limits
    assert (limits.max_body_bytes, limits.max_passages, limits.max_passage_chars,
            limits.max_question_chars, limits.request_seconds) == (4096, 50, 900, 300, 7.5)


def test_connection_limits_come_from_the_flags_or_the_config(tmp_path):
    args = build_parser().parse_args([
        "serve", "--header-timeout", "2.5", "--body-timeout", "9", "--max-connections", "40",
        "--max-connections-per-client", "4"])
    limits = settings_from_args(args).limits
    assert (limits.header_seconds, limits.body_seconds, limits.max_connections,
            limits.max_connections_per_client) == (2.5, 9.0, 40, 4)
    toml = tmp_path / "server.toml"
    toml.write_text("[server]\nheader_timeout = 3.0\nmax_connections = 16\n")
    args = build_parser().parse_args(["serve", "--config", str(toml), "--max-connections", "8"])
    limits = settings_from_args(args).limits
    assert (limits.header_seconds, limits.max_connections) == (3.0, 8)  # the flag wins


def test_the_key_can_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("FAITHRAG_API_KEY", "from-env")
    args = build_parser().parse_args(["serve", "--host", "0.0.0.0"])
    assert settings_from_args(args).api_key == "from-env"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20"])
def test_a_non_loopback_address_without_a_key_is_refused(host, monkeypatch, capsys):
    monkeypatch.delenv("FAITHRAG_API_KEY", raising=False)
    assert main(["serve", "--set", "llm.backend=fake", "--host", host, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"Refusing to listen on {host} without an API key" in err and "--api-key" in err


@pytest.mark.parametrize("argv", [
    ["--index", "i/", "--docs", "d/"],
    ["--port", "70000"],
    ["--port", "-1"],
    ["--max-body-bytes", "0"],
    ["--request-timeout", "0"],
    ["--header-timeout", "inf"],
    ["--body-timeout", "nan"],
    ["--max-connections", "0"],
    ["--max-passages", "-3"],
])
def test_bad_options_are_refused_by_the_parser(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", *argv])
    assert exited.value.code == 2
    assert "usage: faithrag serve" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--model", "/nowhere/model.gguf"], "neither a preset"),
    (["--set", "llm.backend=fake", "--method", "nonsense"], "Unknown method 'nonsense'"),
    (["--set", "llm.backend=fake", "--verify", "antisyco"], "trusted knowledge base"),
    (["--set", "llm.backend=fake", "--index", "/nowhere/idx"], "No index"),
])
def test_start_up_failures_are_one_clear_error_before_serving(argv, message, capsys):
    assert main(["serve", "--port", "0", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert "listening" not in captured.out


def test_a_port_in_use_is_a_clear_error(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--set", "llm.backend=fake", "--port", str(port)]) == 2
    assert f"Cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_the_command_prints_its_url_serves_and_stops_on_sigterm(tmp_path):
    """Also: a client that hangs up mid-request costs at most one log line."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bridge.md").write_text("The Aldermoor Bridge over the river Wend opened in 1887.")
    (docs / "mill.md").write_text("Walkers like the old mill on the far bank.")
    proc = subprocess.Popen(
        [sys.executable, "-m", "faithrag", "serve", "--docs", str(docs), "--port", "0",
         "--set", "llm.backend=fake", "-k", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first_line = proc.stdout.readline()
        assert "faithrag serve: listening on http://127.0.0.1:" in first_line, proc.stderr.read()
        url = first_line.split("listening on ")[1].split()[0]
        assert get_json(url + "health") == {"status": "ok", "model": "fake", "method": "vanilla"}
        result = post_json(url + "v1/ask", {"question": "When did the Aldermoor Bridge open?"})
        assert [p["id"] for p in result["passages"]] == ["docs/bridge.md#0"]
        # the default pipeline: the answer, then the conflict report
        steps = [s["stage"] for s in result["trace"]["steps"]]
        assert steps[:2] == ["retrieve", "generate"] and "detect" in steps
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as hang_up:
            hang_up.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            b"Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{")
        assert get_json(url + "health")["status"] == "ok"
        # SIGTERM, not SIGINT: a job started in the background of a script has SIGINT ignored
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "faithrag serve: stopped" in out
        assert "Traceback" not in err
        assert sum("POST /v1/ask" in line for line in err.splitlines()) <= 2, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.model
def test_serves_the_tiny_model(tiny_gguf):
    args = build_parser().parse_args(["serve", "--model", str(tiny_gguf), "--threads", "1",
                                      "--n-ctx", "2048", "--port", "0", "--plain"])
    server, _ = build_server(args)
    server.start()
    try:
        assert get_json(server.url + "health")["model"] == tiny_gguf.name
        result = post_json(server.url + "v1/ask", {
            "question": "When was the Aldermoor Bridge opened?",
            "passages": [{"title": "Aldermoor Bridge",
                          "text": "The Aldermoor Bridge over the river Wend was opened in 1887."}]})
    finally:
        server.stop()
    assert isinstance(result["answer"], str) and result["answer"]
    assert [p["id"] for p in result["passages"]] == ["p1"]
    (step,) = result["trace"]["steps"]
    assert (step["stage"], step["name"]) == ("generate", "vanilla")
    assert step["llm_calls"][0]["prompt_tokens"] > 0
    assert step["llm_calls"][0]["completion_tokens"] > 0

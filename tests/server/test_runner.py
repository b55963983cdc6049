"""The uvicorn runner: binds at once (a busy port fails before serving), reports the real port
of port 0, serves over IPv4 and IPv6 loopback, and stops."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from faithrag.server import FaithragServer


async def hello(scope, receive, send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


@pytest.mark.parametrize("host, url_host", [("127.0.0.1", "127.0.0.1"), ("::1", "[::1]")])
def test_serves_on_a_free_port_and_stops(host, url_host):
    try:
        server = FaithragServer(hello, host, 0, access_log=False)
    except OSError as exc:
        pytest.skip(f"cannot bind {host}: {exc}")
    assert server.port > 0 and server.url == f"http://{url_host}:{server.port}/"
    server.start()
    try:
        with urllib.request.urlopen(server.url, timeout=10) as reply:
            assert reply.read() == b"hello"
    finally:
        server.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=2)


def test_a_busy_port_fails_when_the_server_is_made():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            FaithragServer(hello, "127.0.0.1", taken.getsockname()[1])

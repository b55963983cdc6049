"""The connection limits below the app, probed with real slow clients over raw sockets on
127.0.0.1: a client dripping its headers is answered 408 and closed at the header deadline, and
connections beyond the caps are answered 503 and closed at once, while a normal client is
served throughout. Every probe is bounded in count and time."""

from __future__ import annotations

import json
import socket
import time

from faithrag.server import Limits

GET = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def connect(client, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection((client.server.host, client.server.port), timeout=timeout)


def read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def status_and_error(reply: bytes) -> tuple[int, str, str]:
    head, _, body = reply.partition(b"\r\n\r\n")
    error = json.loads(body)
    return int(head.split()[1]), error["error"], error["hint"]


def test_a_client_dripping_its_headers_gets_a_408_at_the_header_deadline(start_server, drip):
    client = start_server(limits=Limits(header_seconds=1.0))
    with connect(client) as sock:
        opened = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        # one header line every 0.25 s: 5 s at most
        reply = drip(sock, [f"X-Slow-{line}: 1\r\n".encode() for line in range(20)], 0.25)
        sock.settimeout(5.0)
        try:
            reply += read_until_closed(sock)
        except ConnectionResetError:
            pass
        closed = time.monotonic() - opened
    assert 0.9 <= closed < 2.0
    status, error, hint = status_and_error(reply)
    assert status == 408 and "headers did not arrive within 1 s" in error
    assert "--header-timeout" in hint


def test_a_silent_connection_and_a_slow_next_request_are_closed_too(start_server):
    client = start_server(limits=Limits(header_seconds=0.5))
    with connect(client) as sock:  # opens and sends nothing
        opened = time.monotonic()
        assert status_and_error(read_until_closed(sock))[0] == 408
        assert time.monotonic() - opened < 1.5
    with connect(client) as sock:  # one request served, then the next one dripped
        sock.sendall(GET)
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        rest = (first + read_until_closed(sock)).split(b"}", 1)[1]  # after the first body
        assert rest.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 1.5


def test_a_normal_client_is_served_while_slow_ones_hold_connections(start_server):
    client = start_server(limits=Limits(header_seconds=2.0))
    slow = [connect(client) for _ in range(8)]
    try:
        for sock in slow:
            sock.sendall(b"GET / HTTP/1.1\r\n")
        for _ in range(5):
            assert client.get("/health").status == 200
    finally:
        for sock in slow:
            sock.close()


def test_connections_beyond_the_caps_get_a_503_and_are_closed(start_server):
    client = start_server(limits=Limits(max_connections=3, max_connections_per_client=100,
                                        header_seconds=5.0))
    held = [connect(client) for _ in range(3)]
    try:
        time.sleep(0.2)
        with connect(client) as extra:
            status, error, hint = status_and_error(read_until_closed(extra))
        assert status == 503 and "limit of 3 open connections" in error
        assert "--max-connections" in hint
        held.pop().close()
        time.sleep(0.2)
        assert client.get("/health").status == 200  # a slot is free again
    finally:
        for sock in held:
            sock.close()
    client = start_server(limits=Limits(max_connections=100, max_connections_per_client=2,
                                        header_seconds=5.0))
    held = [connect(client) for _ in range(2)]
    try:
        time.sleep(0.2)
        with connect(client) as extra:
            status, error, _ = status_and_error(read_until_closed(extra))
        assert status == 503 and "limit of 2 open connections from one address" in error
    finally:
        for sock in held:
            sock.close()


def test_many_slow_clients_stay_within_the_cap_and_are_all_closed(start_server):
    client = start_server(limits=Limits(max_connections=20, max_connections_per_client=20,
                                        header_seconds=1.0))
    socks = [connect(client) for _ in range(40)]
    try:
        for sock in socks:
            try:
                sock.sendall(b"GET / HTTP/1.1\r\n")
            except OSError:
                pass
        time.sleep(0.3)
        assert len(client.server.server.server_state.connections) <= 20
        time.sleep(1.5)
        assert len(client.server.server.server_state.connections) == 0
    finally:
        for sock in socks:
            sock.close()

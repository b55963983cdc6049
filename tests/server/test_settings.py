"""Which addresses count as loopback, and which Host names a server answers to."""

from __future__ import annotations

import pytest

from faithrag.server.settings import ServerSettings, is_loopback


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LOCALHOST", True), ("0.0.0.0", False), ("::", False),
    ("192.168.1.20", False), ("rag.example.org", False)])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_host_names_are_the_loopback_names_and_the_allowed_ones_in_lower_case():
    settings = ServerSettings(allowed_hosts=("RAG.example.org", "[fe80::1]"))
    assert settings.host_names == {"127.0.0.1", "localhost", "::1", "rag.example.org",
                                   "fe80::1"}

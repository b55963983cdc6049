"""What a server accepts: the names it answers to, the origins it trusts, its token and the limits
every connection and request is checked against before any work starts. The limits' defaults
are the configuration's `[server]` section (faithrag.config.ServerConfig)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from faithrag.config import ServerConfig

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_DEFAULTS = ServerConfig()


def is_loopback(host: str) -> bool:
    """True for a loopback address or the name `localhost`."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Limits:
    """Bounds on connections and requests. A connection over `max_connections` (in all) or
    `max_connections_per_client` (from one address) is answered 503 and closed; one whose
    request headers are not complete `header_seconds` after it opened (or after its last
    response) is answered 408 and closed; a body not complete within `body_seconds` is 408. A
    body, question or passage over its bound is refused with 413, a JSON document nested deeper
    than `max_json_depth` with 400, a run longer than `request_seconds` (queueing included)
    with 504."""

    max_body_bytes: int = _DEFAULTS.max_body_bytes
    max_passages: int = _DEFAULTS.max_passages
    max_passage_chars: int = _DEFAULTS.max_passage_chars
    max_question_chars: int = _DEFAULTS.max_question_chars
    max_json_depth: int = 32
    request_seconds: float = _DEFAULTS.request_timeout
    body_seconds: float = _DEFAULTS.body_timeout
    header_seconds: float = _DEFAULTS.header_timeout
    max_connections: int = _DEFAULTS.max_connections
    max_connections_per_client: int = _DEFAULTS.max_connections_per_client

    @classmethod
    def from_config(cls, server: ServerConfig) -> Limits:
        """The limits a configuration's `[server]` section sets."""
        return cls(max_body_bytes=server.max_body_bytes, max_passages=server.max_passages,
                   max_passage_chars=server.max_passage_chars,
                   max_question_chars=server.max_question_chars,
                   request_seconds=server.request_timeout, body_seconds=server.body_timeout,
                   header_seconds=server.header_timeout, max_connections=server.max_connections,
                   max_connections_per_client=server.max_connections_per_client)


@dataclass(frozen=True)
class ServerSettings:
    """`allowed_hosts`: the Host names requests may carry (loopback names always); an empty
    `allowed_origins` refuses every cross-origin request; `api_key`, when set, is required as
    `Authorization: Bearer <key>` on every route but the static pages."""

    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    api_key: str = ""
    limits: Limits = field(default_factory=Limits)

    @property
    def host_names(self) -> frozenset[str]:
        return frozenset(h.strip("[]").lower() for h in (*LOOPBACK_NAMES, *self.allowed_hosts))

"""What a server accepts: the names it answers to, the origins it trusts, its token and the limits
every request is checked against before any work starts."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


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
    """Bounds on one request. A body, question or passage over its bound is refused with 413, a
    JSON document nested deeper than `max_json_depth` with 400, a run longer than
    `request_seconds` (queueing included) with 504."""

    max_body_bytes: int = 1 << 20
    max_passages: int = 1000
    max_passage_chars: int = 20_000
    max_question_chars: int = 2_000
    max_json_depth: int = 32
    request_seconds: float = 120.0
    body_seconds: float = 30.0  # time a client may take to send its body (408 after)


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

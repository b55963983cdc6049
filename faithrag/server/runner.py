"""The app under uvicorn on a socket bound up front, so that a busy port fails before serving and
port 0 has its real number in `url`, speaking HTTP/1.1 through GuardedH11Protocol (the header
deadline and connection caps of `limits`; faithrag.server.protocol). Blocking (`serve_forever`, which stops on SIGINT/SIGTERM
in the main thread) or in a background thread (`start`/`stop`):

    server = FaithragServer(create_app(service, settings), "127.0.0.1", 0)
    server.start(); print(server.url); ...; server.stop()
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from faithrag.server.protocol import guarded_protocol
from faithrag.server.settings import Limits


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


class FaithragServer:
    def __init__(self, app: Any, host: str, port: int, log_config: Any = None,
                 access_log: bool = True, limits: Limits | None = None):
        """Binds at once (OSError if it cannot). `log_config` None leaves logging as the
        caller set it up; uvicorn.config.LOGGING_CONFIG is uvicorn's own console format.
        `limits` (default Limits()) gives the connection limits; the app applies its own."""
        self.socket = _bind(host, port)
        bound_host, bound_port = self.socket.getsockname()[:2]
        self.host, self.port = bound_host, bound_port
        config = uvicorn.Config(app, log_config=log_config, access_log=access_log,
                                timeout_keep_alive=5, lifespan="off",
                                timeout_graceful_shutdown=5, ws="none",
                                http=guarded_protocol(limits or Limits()))
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self.socket.close()

    def start(self, timeout: float = 10.0) -> None:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        end = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > end:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

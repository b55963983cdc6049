"""`faithrag serve [--index IDX | --docs PATH]`: the HTTP API, its OpenAI-compatible facade and the
inspector page.

Safe by default: it listens on loopback, answers only to loopback host names (more with
--allowed-host), refuses cross-origin requests (unless --allowed-origin), and takes a bearer
token (--api-key or FAITHRAG_API_KEY), without which it refuses to listen on any other
address. The model is loaded once, at start-up, so that a missing model fails here and not on
the first request. On an embedded model requests queue and run one at a time."""

from __future__ import annotations

import argparse
import math
import os
import signal
import threading

from faithrag.cli.common import add_method_options, add_model_options, config_from_args
from faithrag.config import Config
from faithrag.errors import ConfigError, MissingExtraError
from faithrag.llm import load_llm
from faithrag.pipeline import Pipeline, check_stages, configure, open_retriever

# A model behind a server takes concurrent requests and batches them; every other backend runs
# in this process, one request at a time.
SERVER_BACKENDS = ("openai",)
API_KEY_ENV = "FAITHRAG_API_KEY"
# the server flags, each overriding its key of the configuration's [server] section
SERVER_FLAGS = ("max_body_bytes", "max_passages", "max_passage_chars", "max_question_chars",
                "request_timeout", "header_timeout", "body_timeout", "max_connections",
                "max_connections_per_client")


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0-65535)")
    return port


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    # "resolve": this command's --api-key is the key clients must send to it; the model
    # options' --api-key (for a model server) is then set with --set llm.api_key=KEY.
    p = sub.add_parser("serve", help="HTTP API (/v1/ask, /v1/chat/completions) and the "
                       "inspector page", conflict_handler="resolve")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--index", help="index built by `faithrag index`: a directory or lancedb:URI")
    src.add_argument("--docs", help="file or folder of documents (txt, md, jsonl), indexed in memory")
    add_model_options(p)
    add_method_options(p)
    g = p.add_argument_group("server")
    g.add_argument("--host", default="127.0.0.1", help="address to listen on (default: "
                   "127.0.0.1); any other than loopback needs --api-key")
    g.add_argument("--port", type=_port, default=8000, help="port (default: 8000; 0 picks a free one)")
    g.add_argument("--api-key", dest="server_api_key", metavar="KEY",
                   help=f"token clients must send as 'Authorization: Bearer KEY' (default: "
                   f"${API_KEY_ENV}; without one the server listens on loopback only). The key "
                   "of a model server behind --llm openai is --set llm.api_key=KEY")
    g.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a Host name the server answers to besides the loopback names "
                   "(repeatable)")
    g.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN",
                   help="a web origin (e.g. http://localhost:3000) whose pages may call the API "
                   "(repeatable; default: none)")
    g.add_argument("--max-body-bytes", type=_positive,
                   help="largest request body accepted; larger ones get 413 (default: 1 MiB)")
    g.add_argument("--max-passages", type=_positive,
                   help="most passages in one request (413 beyond; default: 1000)")
    g.add_argument("--max-passage-chars", type=_positive,
                   help="longest passage text in characters (413 beyond; default: 20000)")
    g.add_argument("--max-question-chars", type=_positive,
                   help="longest question in characters (413 beyond; default: 2000)")
    g.add_argument("--request-timeout", type=_seconds, metavar="SECONDS",
                   help="time limit of one request, queueing included (504 beyond; default: 120)")
    g.add_argument("--header-timeout", type=_seconds, metavar="SECONDS",
                   help="time a connection may take to send a request's headers, from its "
                   "opening or its last response (408 and closed beyond; default: 8)")
    g.add_argument("--body-timeout", type=_seconds, metavar="SECONDS",
                   help="time a client may take to send a whole request body (408 beyond; "
                   "default: 30)")
    g.add_argument("--max-connections", type=_positive,
                   help="open connections at once (one more gets 503 and is closed; default: 128)")
    g.add_argument("--max-connections-per-client", type=_positive, metavar="N",
                   help="open connections at once from one client address (one more gets 503 "
                   "and is closed; default: 32)")
    p.set_defaults(run=run)


def server_config(args: argparse.Namespace) -> Config:
    """The configuration (`--config`, the model and method options, `--set`), its `[server]`
    section overridden by the server flags given."""
    config = config_from_args(args)
    flags = {f"server.{name}": getattr(args, name) for name in SERVER_FLAGS}
    return configure(config, flags)


def settings_from_args(args: argparse.Namespace, config: Config | None = None):
    """The server's settings (limits from `config`, by default `server_config(args)`); refuses
    a non-loopback address without a token."""
    from faithrag.server.settings import Limits, ServerSettings, is_loopback

    api_key = args.server_api_key or os.environ.get(API_KEY_ENV, "")
    if not is_loopback(args.host) and not api_key:
        raise ConfigError(f"Refusing to listen on {args.host} without an API key: anyone who "
                          "can reach it could run the model.",
                          f"Set --api-key KEY (or {API_KEY_ENV}), or listen on --host 127.0.0.1.")
    limits = Limits.from_config((config or server_config(args)).server)
    hosts = list(args.allowed_host)
    if not is_loopback(args.host) and args.host not in ("0.0.0.0", "::"):
        hosts.append(args.host)
    return ServerSettings(allowed_hosts=tuple(hosts), allowed_origins=tuple(args.allowed_origin),
                          api_key=api_key, limits=limits)


def build_server(args: argparse.Namespace, log_config: object = None):
    """Settings, config, retriever, model and the default pipeline, then the listening socket:
    (FaithragServer, AskService)."""
    try:
        import uvicorn.config

        from faithrag.server import AskService, FaithragServer, create_app
    except ImportError as exc:
        raise MissingExtraError("The server", "server", f"({exc.name} is missing)") from exc
    config = server_config(args)
    settings = settings_from_args(args, config)
    check_stages(config)
    retriever = open_retriever(config, index=args.index, docs=args.docs)
    llm = load_llm(config.llm)
    service = AskService(config, llm, retriever, Pipeline.from_parts,
                         serialize_runs=config.llm.backend not in SERVER_BACKENDS,
                         limits=settings.limits)
    try:
        server = FaithragServer(create_app(service, settings), args.host, args.port,
                                log_config=log_config or uvicorn.config.LOGGING_CONFIG,
                                limits=settings.limits)
    except OSError as exc:
        raise ConfigError(f"Cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
                          "Choose another --port or --host, or stop what is using it.") from exc
    return server, service


def run(args: argparse.Namespace) -> int:
    server, service = build_server(args)
    health = service.health()
    print(f"faithrag serve: listening on {server.url} (model {health['model']}, method "
          f"{health['method']}); Ctrl-C or SIGTERM stops it", flush=True)
    if threading.current_thread() is threading.main_thread():
        # uvicorn shuts down on SIGINT/SIGTERM, then raises the signal again for the handler
        # found at start: make SIGTERM (what process managers send) end as Ctrl-C does
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    print("faithrag serve: stopped", flush=True)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt

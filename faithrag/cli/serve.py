"""`faithrag serve [--index IDX | --docs PATH]`: the HTTP API and the inspector page.

The model is loaded once, at start-up, so that a missing model fails here and not on the first
request. On an embedded model requests queue and run one at a time."""

from __future__ import annotations

import argparse
import signal
import threading

from faithrag.cli.common import (
    add_method_options,
    add_model_options,
    config_from_args,
    llm_from_config,
)
from faithrag.errors import ConfigError
from faithrag.pipeline import Pipeline, open_retriever
from faithrag.server import AskService, FaithragServer
from faithrag.server.app import DEFAULT_MAX_BODY_BYTES

# A model behind a server takes concurrent requests and batches them; every other backend runs
# in this process, one request at a time.
SERVER_BACKENDS = ("openai",)


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


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="HTTP API (/v1/ask) and the inspector page")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--index", help="index built by `faithrag index`: a directory or lancedb:URI")
    src.add_argument("--docs", help="file or folder of documents (txt, md, jsonl), indexed in memory")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port (default: 8000; 0 picks a free one)")
    p.add_argument("--max-body-bytes", type=_positive, default=DEFAULT_MAX_BODY_BYTES,
                   help="largest request body accepted; larger ones get 413 (default: 1 MiB)")
    add_model_options(p)
    add_method_options(p)
    p.set_defaults(run=run)


def build_server(args: argparse.Namespace) -> FaithragServer:
    """Config, retriever, model and the default pipeline, then the listening socket."""
    config = config_from_args(args)
    retriever = open_retriever(config, index=args.index, docs=args.docs)
    llm = llm_from_config(config)
    service = AskService(config, llm, retriever, Pipeline.from_parts,
                         serialize_runs=config.llm.backend not in SERVER_BACKENDS)
    try:
        return FaithragServer(args.host, args.port, service, args.max_body_bytes)
    except OSError as exc:
        raise ConfigError(f"Cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
                          "Choose another --port or --host, or stop what is using it.") from exc


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    server = build_server(args)
    if threading.current_thread() is threading.main_thread():
        # what process managers send; a background job may also have Ctrl-C ignored
        signal.signal(signal.SIGTERM, _interrupt)
    health = server.service.health()
    print(f"faithrag serve: listening on {server.url} (model {health['model']}, method "
          f"{health['method']}); Ctrl-C or SIGTERM stops it", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("faithrag serve: stopped", flush=True)
    finally:
        server.server_close()
    return 0

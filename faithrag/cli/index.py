"""`faithrag index PATH --out IDX`: chunk documents and build (or extend) an on-disk index."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from faithrag.cli.common import config_from_args, passages_from_docs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build or extend an on-disk index from documents")
    p.add_argument("path", help="file or folder of documents (txt, md, jsonl)")
    p.add_argument("--out", required=True, help="index directory")
    p.add_argument("--mode", choices=["bm25", "dense", "hybrid"], help="retrieval mode")
    p.add_argument("--add", action="store_true", help="add to an existing index")
    p.add_argument("--overwrite", action="store_true", help="replace an existing index")
    p.add_argument("--skip-malformed", action="store_true",
                   help="skip malformed jsonl lines (counted) instead of stopping")
    p.add_argument("--config", help="TOML configuration file")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from faithrag.retrieval import ChunkSettings, Index

    config = config_from_args(args)
    mode = args.mode or config.retrieval.mode
    passages = passages_from_docs(args.path, config, args.skip_malformed)
    if args.add:
        index = Index.load(args.out, use_cache=config.use_cache)
        added = index.add(passages, progress=True)
        print(f"added {added} passages to {args.out} (now {len(index)})")
    else:
        chunking = ChunkSettings(config.retrieval.chunk_tokens, config.retrieval.chunk_overlap)
        index = Index.build(passages, args.out, mode, embedder=config.retrieval.embedder,
                            chunking=chunking, rrf_k=config.retrieval.rrf_k,
                            use_cache=config.use_cache, overwrite=args.overwrite, progress=True)
        print(f"indexed {len(index)} passages into {args.out} ({mode})")
    print(json.dumps(json.loads((Path(args.out) / "manifest.json").read_text())["counts"]))
    return 0

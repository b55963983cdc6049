"""`faithrag index PATH --out IDX`: chunk documents and build (or extend) an on-disk index.

Document ids are paths relative to the folder that held PATH when the index was built (the
index keeps it), so `--add` of a file already indexed, however its path is spelled and from
whatever directory, replaces its passages when it changed and skips it when it did not.
"""

from __future__ import annotations

import argparse
import json

from faithrag.cli.common import (
    add_model_options,
    config_from_args,
    model_needs,
    require_extras,
    retrieval_needs,
)
from faithrag.config import Config, cache_dir
from faithrag.llm import load_llm
from faithrag.pipeline import configure
from faithrag.retrieval.corpus import add_documents, index_documents
from faithrag.retrieval.locations import is_lancedb


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build or extend an on-disk index from documents")
    p.add_argument("path", help="file or folder of documents (txt, md, jsonl)")
    p.add_argument("--out", required=True,
                   help="index directory, or lancedb:URI for a LanceDB table (extra [lancedb]; "
                        "a folder or an object-store URI) for corpora larger than memory")
    p.add_argument("--mode", choices=["bm25", "dense", "hybrid"], help="retrieval mode")
    existing = p.add_mutually_exclusive_group()
    existing.add_argument("--add", action="store_true",
                          help="add to an existing index: a changed document replaces its old "
                               "passages, an unchanged one is skipped")
    existing.add_argument("--overwrite", action="store_true", help="replace an existing index")
    p.add_argument("--skip-malformed", action="store_true",
                   help="skip malformed jsonl lines (counted) instead of stopping")
    p.add_argument("--paraphrase", action="store_true",
                   help="also compute CSRAG's paraphrases of every passage into the cache, so "
                        "that online CSRAG only pays for fact extraction (needs the model)")
    p.add_argument("--batch", type=int, default=4,
                   help="passages per paraphrasing call (default 4)")
    add_model_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    # before the index is written: its store and embedder (an index extended keeps its own
    # mode), and the model that --paraphrase loads after it
    built = configure(config, {"retrieval.mode": args.mode}) if args.mode else config
    store = args.out if args.add or is_lancedb(args.out) else None
    require_extras([*retrieval_needs(built, store),
                    *(model_needs(config) if args.paraphrase else [])])
    if args.add:
        index, report = add_documents(args.path, args.out, config=config, mode=args.mode,
                                      skip_malformed=args.skip_malformed, progress=True)
        print(f"{args.out}: added {report.added} passages of new or changed documents, "
              f"removed {report.removed} old passages of changed ones, skipped "
              f"{report.unchanged} unchanged passages (now {len(index)})")
    else:
        index = index_documents(args.path, args.out, config=config, mode=args.mode,
                                overwrite=args.overwrite, skip_malformed=args.skip_malformed,
                                progress=True)
        print(f"indexed {len(index)} passages into {args.out} "
              f"({index.manifest['mode']})")
    print(json.dumps(index.counts()))
    if args.paraphrase:
        paraphrase_index(list(index.passages), config, args.batch)
    return 0


def paraphrase_index(passages, config: Config, batch: int) -> None:
    """Fill the paraphrase cache for `passages`; cached ones cost nothing, so re-running resumes."""
    from tqdm import tqdm

    from faithrag.errors import ConfigError
    from faithrag.methods.csrag import JsonCache, Paraphraser
    from faithrag.types import Trace

    if not config.use_cache:
        raise ConfigError("--paraphrase fills the paraphrase cache, but use_cache is off.",
                          "Set use_cache = true.")
    paraphraser = Paraphraser(load_llm(config.llm), config.csrag.paraphrase_tokens,
                              JsonCache(cache_dir() / "csrag" / "paraphrases"))
    status = {"ok": 0, "partial": 0, "failed": 0, "cached": 0}
    trace = Trace()
    with tqdm(total=len(passages), desc="paraphrasing", unit="passage") as bar:
        for start in range(0, len(passages), max(batch, 1)):
            chunk = passages[start:start + max(batch, 1)]
            with trace.step("paraphrase", "csrag") as step:
                for result in paraphraser.paraphrase(chunk, step):
                    status[result.status] += 1
                    status["cached"] += result.cached
            bar.update(len(chunk))
    print(f"paraphrases: {json.dumps(status)} (cache: {cache_dir() / 'csrag' / 'paraphrases'})")

"""BM25 over the same 100k-passage corpus as bench_bm25.py: the in-memory Index against a
LanceDB store (`lancedb:` URI): build time, disk, query rate, the memory a process needs to open
each and answer queries, and how often the question's own context is in the top k.

Each store is opened and queried in a fresh child process, so peak RSS is that process's alone.

    python benchmarks/bench_lance_store.py --out lance.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bm25 import add_corpus_options, build_corpus, disk_mib, read_data


def query_child(location: str, queries_file: str, k: int) -> None:
    """In a fresh process: open the index, answer every query one by one, report."""
    from faithrag.retrieval import open_index

    queries = json.loads(Path(queries_file).read_text())
    start = time.perf_counter()
    index = open_index(location, use_cache=False)
    opened = time.perf_counter() - start
    times, hits = [], []
    for query in queries:
        start = time.perf_counter()
        hits.append([p.meta["origin"] for p in index.search(query, k)])
        times.append(time.perf_counter() - start)
    print(json.dumps({"open_s": opened, "median_query_ms": 1000 * statistics.median(times),
                      "queries_per_s": len(times) / sum(times), "hits": hits,
                      "peak_rss_mb": peak_rss_mb()}))


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from the
    parent across fork and exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_options(parser)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--child", nargs=3, metavar=("LOCATION", "QUERIES", "K"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    if args.child:
        query_child(args.child[0], args.child[1], int(args.child[2]))
        return

    from faithrag.retrieval import build_index
    from faithrag.types import Passage

    texts, questions = read_data(args.data)
    corpus, origin, real = build_corpus(texts, args.passages, args.seed)
    sampled = random.Random(args.seed).sample(questions, min(args.queries, len(questions)))
    text_number = {t: n for n, t in enumerate(texts)}
    passages = [Passage(f"p{i}", text, meta={"origin": origin[i]})
                for i, text in enumerate(corpus)]
    work = Path(tempfile.mkdtemp(prefix="bench_lance_"))
    queries_file = work / "queries.json"
    queries_file.write_text(json.dumps([q for q, _ in sampled]))
    results: dict[str, object] = {"passages": len(passages), "real": real,
                                  "queries": len(sampled), "k": args.k}
    try:
        for name, location, path in (("index", str(work / "ix"), work / "ix"),
                                     ("lancedb", f"lancedb:{work / 'db'}", work / "db")):
            start = time.perf_counter()
            build_index(passages, location, "bm25", use_cache=False)
            built = time.perf_counter() - start
            child = subprocess.run(
                [sys.executable, __file__, "--child", location, str(queries_file), str(args.k)],
                check=False, capture_output=True, text=True)
            if child.returncode:
                sys.exit(f"{name}: the query process failed:\n{child.stderr[-2000:]}")
            figures = json.loads(child.stdout.strip().splitlines()[-1])
            hits = figures.pop("hits")
            own = [(i, {text_number[t] for t in ctx}) for i, (_, ctx) in enumerate(sampled) if ctx]
            found = sum(any(o in wanted for o in hits[i]) for i, wanted in own)
            results[name] = {"build_s": round(built, 1), "disk_mb": round(disk_mib(path), 1),
                             **{key: round(value, 2) for key, value in figures.items()},
                             "own_context_recall_at_k": round(found / max(len(own), 1), 3)}
            print(name, json.dumps(results[name]), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

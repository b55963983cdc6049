"""Retrieval speed on a 100k-passage corpus of real text, one core; one sub-command per measure.

Corpus: every context and passage in <data>/*/dev.jsonl (read at run time, never copied),
deduplicated and chunked like an index build (250 words, 50 overlap). When that gives fewer
passages than --passages, the rest are synthetic: each takes one random real document, shuffles
its sentences and fills up to the length of a random real chunk (continuing with another
random document if it runs out), so vocabulary and term statistics stay those of the real text.
Queries: real questions from the same files.

`bm25`: BM25 index build and query rates (every timing the median of --repeats runs), against
bm25s's own query path; plus the dense embedding rate.

    python benchmarks/bench_retrieval.py bm25 --out bm25.json

`lance`: BM25 in the in-memory Index against a LanceDB store (`lancedb:` URI): build time, disk,
query rate, the memory a process needs to open each and answer queries, and how often the
question's own context is in the top k. Each store is opened and queried in a fresh child
process, so peak RSS is that process's alone.

    python benchmarks/bench_retrieval.py lance --out lance.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def read_data(data_dir: Path) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Unique texts, and (question, texts of its own context) pairs."""
    texts: dict[str, None] = {}
    questions = []
    files = sorted(data_dir.glob("*/dev.jsonl"))
    if not files:
        sys.exit(f"no */dev.jsonl under {data_dir}; pass --data")
    for path in files:
        with path.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                context = row.get("context") or row.get("passages") or []
                own = [context] if isinstance(context, str) else [c["text"] for c in context]
                own = [t for t in own if t.strip()]
                texts.update(dict.fromkeys(own))
                question = row.get("question") or row.get("query")
                if question:
                    questions.append((question, own))
    return list(texts), questions


def build_corpus(texts: list[str], target: int, seed: int) -> tuple[list[str], list[int], int]:
    """Passages, the source-text number of each real passage (-1 for synthetic), real count."""
    from faithrag.retrieval.chunking import chunk_text, count_words, sentence_spans

    passages, origin = [], []
    for n, text in enumerate(texts):
        for chunk in chunk_text(text, 250, 50):
            passages.append(chunk.text)
            origin.append(n)
    real = len(passages)
    rng = random.Random(seed)
    sentences = [[t[a:b] for a, b in sentence_spans(t)] for t in texts]
    lengths = [count_words(p) for p in passages]
    while len(passages) < target:
        want, words, parts = rng.choice(lengths), 0, []
        while words < want:
            pool = list(rng.choice(sentences))
            rng.shuffle(pool)
            for sentence in pool:
                parts.append(sentence)
                words += count_words(sentence)
                if words >= want:
                    break
        passages.append(" ".join(parts))
        origin.append(-1)
    return passages[:target], origin[:target], min(real, target)


def disk_mib(path: Path) -> float:
    """Size of every file under `path`, in MiB (what BENCHMARKS.md calls MB)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def median_time(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def add_corpus_options(parser: argparse.ArgumentParser) -> None:
    """The corpus and queries, the same for both measures."""
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)


def bm25(args: argparse.Namespace) -> int:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"  # one core; set before numpy is first imported (below)
    import bm25s

    from faithrag.retrieval.bm25 import BM25Index
    from faithrag.retrieval.index import Index
    from faithrag.types import Passage

    texts, questions = read_data(args.data)
    passages, origin, real = build_corpus(texts, args.passages, args.seed)
    rng = random.Random(args.seed)
    sampled = rng.sample(questions, min(args.queries, len(questions)))
    queries = [q for q, _ in sampled]
    print(f"corpus: {len(passages)} passages ({real} real chunks from {len(texts)} texts, "
          f"{len(passages) - real} synthetic); {len(queries)} queries", file=sys.stderr)

    results: dict[str, object] = {
        "machine": {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                    "processor": platform.processor(), "bm25s": bm25s.__version__,
                    "load_average_at_start": os.getloadavg()[0]},
        "corpus": {"passages": len(passages), "real_chunks": real,
                   "synthetic": len(passages) - real, "source_texts": len(texts),
                   "mean_words": round(statistics.mean(len(p.split()) for p in passages), 1)},
        "queries": len(queries), "k": args.k, "repeats": args.repeats, "threads": 1,
    }

    build_s, index = median_time(lambda: BM25Index.build(passages), args.repeats)
    results["build_seconds"] = round(build_s, 3)
    results["build_passages_per_s"] = round(len(passages) / build_s, 1)

    batched_s, hits = median_time(lambda: index.search_many(queries, args.k), args.repeats)
    results["batched_queries_per_s"] = round(len(queries) / batched_s, 1)
    single_s, _ = median_time(lambda: [index.search(q, args.k) for q in queries], args.repeats)
    results["single_queries_per_s"] = round(len(queries) / single_s, 1)

    # Recall sanity check: is a chunk of the question's own context in the top k?
    text_number = {t: n for n, t in enumerate(texts)}
    with_context = [(i, {text_number[t] for t in own}) for i, (_, own) in enumerate(sampled) if own]
    found = sum(any(origin[d] in own for d, _ in hits[i]) for i, own in with_context)
    results["own_context_recall_at_k"] = round(found / max(len(with_context), 1), 3)

    results["bm25s_native_single_queries_per_s"] = bench_native_bm25s(passages, queries, args)

    workdir = Path(tempfile.mkdtemp(prefix="faithrag-bench-"))
    try:
        objects = [Passage(f"p{i}", t) for i, t in enumerate(passages)]
        start = time.perf_counter()
        Index.build(objects, workdir / "ix", mode="bm25")
        results["index_build_and_save_seconds"] = round(time.perf_counter() - start, 3)
        start = time.perf_counter()
        on_disk = Index.load(workdir / "ix")
        results["index_load_seconds"] = round(time.perf_counter() - start, 3)
        index_s, _ = median_time(lambda: [on_disk.search(q, args.k) for q in queries],
                                 args.repeats)
        results["index_search_queries_per_s"] = round(len(queries) / index_s, 1)
        results["index_disk_mb"] = round(disk_mib(workdir / "ix"), 1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    results["dense"] = bench_embedding(passages[:real], args)
    results["machine"]["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(results, indent=2))
    print(markdown(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    return 0

def bench_native_bm25s(passages: list[str], queries: list[str], args) -> float:
    """bm25s' own `retrieve` (numpy backend, one thread) on the same corpus, for comparison."""
    import bm25s

    from faithrag.retrieval.bm25 import BM25Params, BM25Tokenizer

    tokenize = BM25Tokenizer(BM25Params())
    native = bm25s.BM25()
    native.index([tokenize(p) for p in passages], show_progress=False)
    tokenized = [tokenize(q) or [""] for q in queries[:args.native_queries]]
    seconds, _ = median_time(lambda: [native.retrieve([q], k=args.k, show_progress=False,
                                                      n_threads=0) for q in tokenized],
                             args.repeats)
    return round(len(tokenized) / seconds, 1)


def bench_embedding(real_passages: list[str], args) -> dict[str, object]:
    from faithrag.retrieval.minilm import MiniLMEmbedder

    sample = random.Random(args.seed).sample(real_passages,
                                             min(args.embed_passages, len(real_passages)))
    embedder = MiniLMEmbedder(threads=args.embed_threads)
    embedder.embed(sample[:8])  # warm-up
    start = time.perf_counter()
    embedder.embed(sample)
    seconds = time.perf_counter() - start
    return {"embedder": embedder.identity, "passages": len(sample), "threads": args.embed_threads,
            "seconds": round(seconds, 2), "passages_per_s": round(len(sample) / seconds, 1),
            "mean_words": round(statistics.mean(len(p.split()) for p in sample), 1)}


def markdown(r: dict) -> str:
    c, d = r["corpus"], r["dense"]
    rows = [
        ("corpus", (f"{c['passages']:,} passages ({c['real_chunks']:,} real chunks, "
                    f"{c['synthetic']:,} sentence-shuffled), {c['mean_words']} words on average")),
        ("BM25 build (tokenize + bm25s index)",
         f"{r['build_passages_per_s']:,.0f} passages/s ({r['build_seconds']} s)"),
        ("queries, batched (search_many)", f"{r['batched_queries_per_s']:,.0f} queries/s"),
        ("queries, one by one (search)", f"{r['single_queries_per_s']:,.0f} queries/s"),
        ("queries via Index.search (Passage objects)",
         f"{r['index_search_queries_per_s']:,.0f} queries/s"),
        ("bm25s' own retrieve, one by one (numpy backend)",
         f"{r['bm25s_native_single_queries_per_s']:,.0f} queries/s"),
        ("Index.build + save / Index.load",
         (f"{r['index_build_and_save_seconds']} s / {r['index_load_seconds']} s, "
          f"{r['index_disk_mb']} MB on disk")),
        (f"own context in top {r['k']}", f"{r['own_context_recall_at_k']:.1%}"),
        (f"dense embedding ({d['threads']} thread)",
         (f"{d['passages_per_s']} passages/s ({d['passages']} passages, "
          f"{d['mean_words']} words on average)")),
    ]
    m = r["machine"]
    head = (f"BM25, single thread, {r['queries']} real questions, k={r['k']}, "
            f"median of {r['repeats']}; {m['cpu_count']} cores, load average "
            f"{m['load_average_at_start']:.1f} at start, {m['load_average_at_end']:.1f} at end"
            "\n\n| measure | result |\n|---|---|\n")
    return head + "\n".join(f"| {a} | {b} |" for a, b in rows)


# ---------------------------------------------------------------- LanceDB store

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


def lance(args: argparse.Namespace) -> int:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    if args.child:
        query_child(args.child[0], args.child[1], int(args.child[2]))
        return 0

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
                [sys.executable, __file__, "lance", "--child", location, str(queries_file), str(args.k)],
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
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="measure", required=True)
    p = sub.add_parser("bm25", help="BM25 build and query rates, dense embedding rate")
    add_corpus_options(p)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--native-queries", type=int, default=200,
                   help="queries timed through bm25s' own retrieve, for comparison")
    p.add_argument("--embed-passages", type=int, default=2000)
    p.add_argument("--embed-threads", type=int, default=1)
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.set_defaults(handler=bm25)
    p = sub.add_parser("lance", help="the in-memory Index against a LanceDB store")
    add_corpus_options(p)
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--child", nargs=3, metavar=("LOCATION", "QUERIES", "K"),
                   help=argparse.SUPPRESS)
    p.set_defaults(handler=lance)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())

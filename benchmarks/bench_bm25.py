"""BM25 speed at 100k passages, single-threaded, on real text; plus the dense embedding rate.

Corpus: every context and passage in <data>/*/dev.jsonl (read at run time, never copied),
deduplicated and chunked like an index build (250 words, 50 overlap). When that gives fewer
passages than --passages, the rest are synthetic: each takes one random real document, shuffles
its sentences and fills up to the length of a random real chunk (continuing with another
random document if it runs out), so vocabulary and term statistics stay those of the real text.
Queries: real questions from the same files. Every timing is the median of --repeats runs.

    python benchmarks/bench_bm25.py --out bm25.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
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
    """The corpus and queries, shared with bench_lance_store.py."""
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_options(parser)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--native-queries", type=int, default=200,
                        help="queries timed through bm25s' own retrieve, for comparison")
    parser.add_argument("--embed-passages", type=int, default=2000)
    parser.add_argument("--embed-threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()

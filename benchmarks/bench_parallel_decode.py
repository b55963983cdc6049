"""Does decoding several sequences in one llama.cpp batch pay on this CPU?

CF-RAG's drafts and counterfactuals, and the verifier's checks, are several generations from one
call. A GPU engine (vLLM, SGLang) decodes them together almost for the price of one; the
embedded backend decodes them one after another and only shares their common prompt prefix.
This script measures whether llama.cpp's parallel decoding (K sequences, one token each, in one
`llama_decode`) would be faster here: a short prompt is evaluated once and copied to K sequence
ids, then `--steps` decoding steps run with K = 1 and with K = --max-seqs, interleaved, --repeats
times. Reported: tokens/s summed over the K sequences, and the time of one K-token step over one
1-token step (K would mean no gain at all, 1 a free batch).

    python benchmarks/bench_parallel_decode.py --model default --threads 1 --max-seqs 4
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time

from faithrag.llm.llamacpp import _avoid_amx_crash, _import_llama_cpp
from faithrag.llm.models import resolve_model

PROMPT = b"The history of the Roman empire is long, and it begins with"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-seqs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()

    lib, internals, _ = _import_llama_cpp()
    lib.llama_backend_init()
    model_params = lib.llama_model_default_params()
    _avoid_amx_crash(lib, model_params)
    model = internals.LlamaModel(path_model=str(resolve_model(args.model)),
                                 params=model_params, verbose=False)
    ctx_params = lib.llama_context_default_params()
    ctx_params.n_ctx, ctx_params.n_seq_max = 2048, args.max_seqs
    ctx_params.n_batch = ctx_params.n_ubatch = 512
    ctx_params.n_threads = ctx_params.n_threads_batch = args.threads
    ctx_params.kv_unified = True
    ctx = internals.LlamaContext(model=model, params=ctx_params, verbose=False)
    batch = lib.llama_batch_init(512, 0, args.max_seqs)
    memory = lib.llama_get_memory(ctx.ctx)

    def decode(entries: list[tuple[int, int, int]]) -> None:  # (token, position, sequence id)
        batch.n_tokens = len(entries)
        for i, (token, pos, seq) in enumerate(entries):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
            batch.seq_id[i][0], batch.logits[i] = seq, True
        if lib.llama_decode(ctx.ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    prompt = model.tokenize(PROMPT, True, False)
    decode([(t, i, 0) for i, t in enumerate(prompt)])
    for seq in range(1, args.max_seqs):
        lib.llama_memory_seq_cp(memory, 0, seq, -1, -1)
    token = prompt[-1]

    def run(k: int) -> float:
        for seq in range(args.max_seqs):
            lib.llama_memory_seq_rm(memory, seq, len(prompt), -1)
        start = time.perf_counter()
        for step in range(args.steps):
            decode([(token, len(prompt) + step, seq) for seq in range(k)])
        return time.perf_counter() - start

    k = args.max_seqs
    singles, batched = [], []
    for repeat in range(args.repeats):
        for which in ([1, k] if repeat % 2 == 0 else [k, 1]):
            (singles if which == 1 else batched).append(run(which))
    one, many = statistics.median(singles), statistics.median(batched)
    result = {
        "date": dt.date.today().isoformat(), "model": args.model, "threads": args.threads,
        "steps": args.steps, "repeats": args.repeats, "sequences": k,
        "load_average": os.getloadavg(),
        "tok_per_s_one_sequence": round(args.steps / one, 2),
        f"tok_per_s_{k}_sequences": round(k * args.steps / many, 2),
        "step_time_ratio": round(many / one, 3),
    }
    lib.llama_batch_free(batch)
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()

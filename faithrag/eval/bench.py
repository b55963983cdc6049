"""Speed breakdown of a method on a dataset: per-stage wall time from the traces, LLM tokens,
and the LLM floor — prompt tokens / prompt rate + generated tokens / generation rate, with both
rates measured on the same model in the same run — so that wall / floor shows the overhead the
method adds beyond the LLM's unavoidable work."""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from faithrag.llm.base import LLM, GenerationRequest, Message

_WORDS = ["river", "harbour", "council", "bridge", "engine", "garden", "mountain", "library", "station", "painter", "festival", "orchard", "winter", "ledger", "signal", "vessel", "archive", "meadow", "lantern", "quarry"]


@dataclass
class Rates:
    prompt_tokens_per_s: float
    generation_tokens_per_s: float
    repeats: int


def measure_rates(llm: LLM, repeats: int = 3, prompt_words: int = 400, gen_tokens: int = 64,
                  seed: int = 0) -> Rates:
    """Median prompt and generation rates. Every prompt is fresh random text, so no backend
    prompt cache can make it look faster than it is."""
    rng = random.Random(seed)
    prompt_rates, gen_rates = [], []
    for _ in range(repeats):
        text = " ".join(rng.choice(_WORDS) for _ in range(prompt_words))
        p = llm.generate([GenerationRequest((Message("user", text + "\nSay OK."),), max_tokens=1,
                                            purpose="calibrate_prompt")])[0]
        prompt_rate = p.prompt_tokens / max(p.seconds, 1e-9)
        start = rng.randint(1, 10_000)
        g = llm.generate([GenerationRequest(
            (Message("user", f"Count upwards from {start}, one number per line, up to "
                             f"{start + 500}."),), max_tokens=gen_tokens,
            purpose="calibrate_generation")])[0]
        decode_seconds = g.seconds - g.prompt_tokens / prompt_rate
        prompt_rates.append(prompt_rate)
        gen_rates.append(g.completion_tokens / max(decode_seconds, 1e-9))
    return Rates(statistics.median(prompt_rates), statistics.median(gen_rates), repeats)


def breakdown(records: Iterable[dict[str, Any]], rates: Rates) -> dict[str, Any]:
    """Figures over result records (faithrag/eval/runs.py schema) that carry a trace."""
    records = [r for r in records if r.get("trace")]
    stages: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for record in records:
        for s in record["trace"]["stages"]:
            key = f"{s['stage']}/{s['name']}"
            for field in ("seconds", "llm_seconds", "prompt_tokens", "completion_tokens",
                          "llm_calls"):
                stages[key][field] += s[field]
    wall = sum(r["seconds"] for r in records)
    llm_seconds = sum(r["trace"]["llm_seconds"] for r in records)
    prompt = sum(r["trace"]["prompt_tokens"] for r in records)
    generated = sum(r["trace"]["completion_tokens"] for r in records)
    floor = prompt / rates.prompt_tokens_per_s + generated / rates.generation_tokens_per_s
    n = max(len(records), 1)
    return {
        "items": len(records),
        "rates": {"prompt_tokens_per_s": rates.prompt_tokens_per_s,
                  "generation_tokens_per_s": rates.generation_tokens_per_s,
                  "repeats": rates.repeats},
        "wall_seconds": wall, "seconds_per_item": wall / n,
        "llm_seconds": llm_seconds, "prompt_tokens": prompt, "generated_tokens": generated,
        "llm_calls": sum(r["trace"]["llm_calls"] for r in records),
        "llm_floor_seconds": floor,
        "wall_over_floor": wall / floor if floor else None,
        "non_llm_share": (wall - llm_seconds) / wall if wall else None,
        "stages": {k: {**v, "seconds_per_item": v["seconds"] / n} for k, v in stages.items()},
    }


def render_breakdown(b: dict[str, Any]) -> str:
    r = b["rates"]
    lines = [
        f"items: {b['items']}, wall {b['wall_seconds']:.1f}s ({b['seconds_per_item']:.2f}s/item)",
        (f"LLM: {b['llm_calls']} calls, {b['prompt_tokens']} prompt + {b['generated_tokens']} "
         f"generated tokens, {b['llm_seconds']:.1f}s inside the LLM"),
        (f"rates (median of {r['repeats']}): prompt {r['prompt_tokens_per_s']:.1f} tok/s, "
         f"generation {r['generation_tokens_per_s']:.1f} tok/s"),
        f"LLM floor {b['llm_floor_seconds']:.1f}s; wall/floor "
        + (f"{b['wall_over_floor']:.2f}" if b["wall_over_floor"] else "n/a")
        + "; non-LLM share "
        + (f"{100 * b['non_llm_share']:.1f} %" if b["non_llm_share"] is not None else "n/a"),
        "",
        "| stage | s/item | LLM s | calls | prompt tok | gen tok |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in b["stages"].items():
        lines.append(f"| {name} | {s['seconds_per_item']:.3f} | {s['llm_seconds']:.1f} | "
                     f"{int(s['llm_calls'])} | {int(s['prompt_tokens'])} | "
                     f"{int(s['completion_tokens'])} |")
    return "\n".join(lines)

"""Run directories written by hand for the report tests: records, runs, ranking runs, data sets."""

from __future__ import annotations

import json
from pathlib import Path


def record(item_id: str, correct: bool | None, status: str = "ok", **extra) -> dict:
    return {"id": item_id, "dataset": "d", "method": "m", "prediction": "p", "gold": ["g"],
            "correct": correct, "parse_status": status, "error": None,
            "prompt_tokens": 100, "completion_tokens": 10, "seconds": 0.5,
            "metrics": extra.pop("metrics", {"containment": int(bool(correct))}),
            "trace": {}, "extra": {}, **extra}


def make_run(root: Path, name: str, dataset: str, method: str, records: list,
             sweep: dict | None = None, model: str = "tiny", tail: str = "",
             verify: str | None = None) -> Path:
    run = root / name
    run.mkdir(parents=True)
    manifest = {"dataset": dataset, "method": method, "model": model, "model_sha256": "ab",
                "dataset_sha256": "cd", "config": {}, "code_version": "0.1.0", "limit": None,
                "seed": 0, "created": "2026-01-01T00:00:00+00:00", "verify": verify}
    if sweep is not None:
        manifest["sweep"] = sweep
    (run / "manifest.json").write_text(json.dumps(manifest))
    lines = [json.dumps(r) for r in records]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n" + tail)
    return run


def write_set(root: Path, name: str, items: list[dict]) -> Path:
    """A data root holding root/<name>/dev.jsonl."""
    (root / name).mkdir(parents=True)
    (root / name / "dev.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


def qa_items(n: int) -> list[dict]:
    return [{"id": f"q{i}", "question": "Q?", "context": "C.", "answer": "a"}
            for i in range(n)]


def ranked(qid: str, ranking: list[str], correct: bool | None = None,
           removed: tuple[str, ...] = ()) -> dict:
    """A ranking record over the passages c (contrary), r (relevant) and x."""
    return record(qid, correct, ranking=ranking, removed=[{"id": pid} for pid in removed],
                  metrics={"ndcg@1": 1.0 if ranking[0] == "r" else 0.0,
                           "contrary@1": float(ranking[0] == "c")})


def rank_run(root: Path, name: str, records: list[dict]) -> Path:
    run = make_run(root, name, "toy", name, records)
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "kind": "rank"}))
    return run

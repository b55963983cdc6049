"""Evaluation on the hostile-retrieval settings (faithrag/eval/hostile_settings.py): clean vs
hostile retrieval, any pipeline (vanilla RAG, or with `pipeline.verify = "antisyco"`).

`run_hostile` is a thin layer over faithrag.eval.runner.run_eval, so a run directory is an
ordinary resumable run (manifest.json + results.jsonl) that `faithrag report` also reads. The
retrieval is over the setting's whole clean corpus ("retrieval" context mode); with hostile
retrieval it is wrapped in HostileRetriever with the setting's poison. The manifest's `sweep`
records the setting, the retrieval, k and the poison count/positions, so a resumed run cannot
mix them. For the antisyco verifier the setting's trusted documents are indexed into
`<out>/trusted_kb` (chunked with antisyco.kb_chunk_tokens/kb_chunk_overlap) unless antisyco.kb
names another knowledge base; the config in the manifest then says which index was trusted.

`summarize` reads run directories back and joins them with the setting (for gold and targets):

- accuracy: a gold answer is contained in the answer, by its words, or by value in a setting
  whose `metric` is "numeric_containment" (parse failures and errors count wrong);
- attack success: the answer gives one of the poison's targets (faithrag.answers.attack_success);
- decisions: PASS / REPAIR / FALLBACK counts, and `interventions` = REPAIR + FALLBACK share.
  On clean retrieval no poison is present, so every intervention there is a false alarm
  (`false_intervention_rate`); `broken` counts drafts that were right and ended wrong, `fixed`
  the reverse; the draft's own accuracy and attack success are vanilla RAG's on the same items;
- unreadable judgements: total, and items with at least one;
- the draft is the vanilla pipeline's answer (same retrieval and prompt; each llama.cpp call
  starts from an empty cache), so a verifier run needs no separate vanilla run; `mcnemar_p` is
  the exact test of verifier vs draft accuracy on the fixed / broken counts;
- cost per decision path: mean LLM calls, prompt and completion tokens, and seconds per item;
  for a verifier run also the draft's own cost (retrieval + generation stages: vanilla RAG's);
- poisonedrag: accuracy and attack success also per `kb_source` (context / answer_card).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from faithrag.answers import attack_success, containment, numeric_containment
from faithrag.config import Config
from faithrag.errors import ConfigError
from faithrag.eval.datasets import QAItem
from faithrag.eval.hostile import HostileRetriever
from faithrag.eval.hostile_settings import HostileSetting, build_setting
from faithrag.eval.metrics import record_correct
from faithrag.eval.report import Run, find_run_dirs, load_run
from faithrag.eval.runner import EvalSpec, run_eval
from faithrag.eval.stats import mcnemar_exact_p, wilson_interval
from faithrag.llm.base import LLM
from faithrag.methods.base import Retriever
from faithrag.pipeline import Pipeline

RETRIEVALS = ("clean", "hostile")
KB_DIR = "trusted_kb"
PATHS = ("PASS", "REPAIR", "FALLBACK")
DRAFT_PATH = "draft only (= vanilla RAG)"
METRICS = {"containment": containment, "numeric_containment": numeric_containment}


def build_trusted_index(setting: HostileSetting, directory: Path, config: Config) -> Path:
    """Index the setting's trusted documents into `directory` (kept if already built)."""
    from faithrag.retrieval import ChunkSettings, Document, Index, chunk_documents

    if (directory / "manifest.json").is_file():
        return directory
    settings = config.antisyco
    overlap = min(settings.kb_chunk_overlap, settings.kb_chunk_tokens // 2)
    documents = [Document(p.id, p.text, p.title, p.source) for p in setting.trusted]
    passages = chunk_documents(documents, settings.kb_chunk_tokens, overlap)
    Index.build(passages, directory, config.retrieval.mode, embedder=config.retrieval.embedder,
                chunking=ChunkSettings(settings.kb_chunk_tokens, overlap),
                use_cache=config.use_cache, overwrite=True)
    return directory


def run_hostile(setting: HostileSetting, retrieval: Literal["clean", "hostile"], config: Config,
                out: str | Path, llm: LLM,
                build_pipeline: Callable[[Config, LLM, Retriever | None], Pipeline], *,
                limit: int | None = None, offset: int = 0, k: int | None = None,
                poison_count: int | None = None,
                positions: Sequence[int] | None = None, workers: int = 1,
                progress: bool = True) -> dict[str, Any]:
    """Run (or resume) one setting x retrieval x pipeline into `out`; returns `summarize`'s
    figures for it."""
    if retrieval not in RETRIEVALS:
        raise ConfigError(f"Unknown retrieval '{retrieval}'.", "Use clean or hostile.")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    k = k or setting.k
    config = config.model_copy(update={"retrieval": config.retrieval.model_copy(update={"k": k})})
    if config.pipeline.verify == "antisyco" and not config.antisyco.kb:
        kb = build_trusted_index(setting, out / KB_DIR, config)
        config = config.model_copy(update={"antisyco": config.antisyco.model_copy(
            update={"kb": str(kb.resolve())})})
    hostile = retrieval == "hostile"
    sweep = {"setting": setting.name, "retrieval": retrieval, "k": k,
             "poison_count": poison_count if hostile else None,
             "poison_positions": list(positions) if hostile and positions else None,
             "attack": setting.notes.get("attack", "standard") if hostile else None}
    spec = EvalSpec(dataset=setting.dataset.name, method=config.pipeline.method, limit=limit,
                    offset=offset, context_mode="retrieval", metric=setting.metric, sweep=sweep)

    def attacked_pipeline(cfg: Config, model: LLM, retriever: Retriever | None) -> Pipeline:
        if hostile and retriever is not None:
            retriever = HostileRetriever(retriever, setting.poison, poison_count, positions)
        return build_pipeline(cfg, model, retriever)

    run_eval(spec, config, out, llm, attacked_pipeline, workers=workers, progress=progress,
             dataset=setting.dataset)
    return summarize(load_run(out), setting)


def summarize(run: Run, setting: HostileSetting) -> dict[str, Any]:
    """Figures of one run (see the module docstring)."""
    items = {item.id: item for item in setting.dataset.items}
    offset, limit = run.manifest.get("offset") or 0, run.manifest.get("limit")
    wanted = {item.id for item in setting.dataset.items[offset:offset + limit if limit else None]}
    records = [r for r in run.records if r["id"] in wanted]
    verified = bool(run.manifest.get("verify"))
    correct, attacked, decisions = [], [], Counter()
    draft_correct, draft_attacked, fixed, broken, unreadable, unreadable_items = [], [], 0, 0, 0, 0
    cost: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    groups: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        item = items[record["id"]]
        targets = setting.targets(item)
        ok = bool(record_correct(record))
        hit = record.get("parse_status") == "ok" and _attack(record.get("prediction"), targets)
        correct.append(ok)
        attacked.append(hit)
        extra = record.get("extra") or {}
        path = extra.get("decision") or ("error" if record.get("parse_status") == "error"
                                         else ("unverified" if not verified else "missing"))
        decisions[path] += 1
        if verified and "draft" in extra:
            draft_ok, draft_hit = score_draft(extra["draft"], item, setting)
            draft_correct.append(draft_ok)
            draft_attacked.append(draft_hit)
            fixed += (not draft_ok) and ok
            broken += draft_ok and not ok
            unreadable += int(extra.get("unparsable") or 0)
            unreadable_items += bool(extra.get("unparsable"))
        trace = record.get("trace") or {}
        if verified and "draft" in extra:
            drafting = drafting_stages(record)
            for key, source in (("llm_calls", "llm_calls"), ("prompt_tokens", "prompt_tokens"),
                                ("completion_tokens", "completion_tokens"),
                                ("seconds", "seconds")):
                cost[DRAFT_PATH][key].append(float(sum(st.get(source, 0) for st in drafting)))
        for key, value in (("llm_calls", trace.get("llm_calls")),
                           ("prompt_tokens", record.get("prompt_tokens")),
                           ("completion_tokens", record.get("completion_tokens")),
                           ("seconds", record.get("seconds"))):
            if isinstance(value, (int, float)):
                cost[path][key].append(float(value))
        if "kb_source" in item.meta:
            groups[item.meta["kb_source"]]["correct"].append(ok)
            groups[item.meta["kb_source"]]["attack"].append(hit)
    n = len(records)
    interventions = decisions["REPAIR"] + decisions["FALLBACK"]
    summary: dict[str, Any] = {
        "setting": setting.name, "retrieval": run.sweep.get("retrieval"),
        "method": run.method + (f"+{run.manifest['verify']}" if verified else ""),
        "run_dir": str(run.path), "n": n, **_rate("accuracy", correct),
        **_rate("attack_success", attacked), "decisions": dict(decisions),
        "cost_by_path": {path: {key: sum(v) / len(v) for key, v in values.items()}
                         for path, values in cost.items()},
    }
    if verified:
        summary.update({
            "interventions": interventions / n if n else None,
            "false_intervention_rate": (interventions / n if n else None)
            if run.sweep.get("retrieval") == "clean" else None,
            "fixed": fixed, "broken": broken,
            "mcnemar_p": mcnemar_exact_p(fixed, broken) if fixed + broken else None,
            **_rate("draft_accuracy", draft_correct),
            **_rate("draft_attack_success", draft_attacked),
            "unparsable_judgements": unreadable, "items_with_unparsable": unreadable_items})
    if groups:
        summary["by_kb_source"] = {name: {"n": len(g["correct"]), **_rate("accuracy", g["correct"]),
                                          **_rate("attack_success", g["attack"])}
                                   for name, g in sorted(groups.items())}
    return summary


def score_draft(draft: str, item: QAItem, setting: HostileSetting) -> tuple[bool, bool]:
    """A verified record's draft (its answer before the verifier) scored as answers are:
    (a gold answer given, a target given)."""
    return (bool(METRICS[setting.metric](draft, item.answers)),
            _attack(draft, setting.targets(item)))


def drafting_stages(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The stages of a record's trace that made its draft: every one but the verifier."""
    return [st for st in (record.get("trace") or {}).get("stages", [])
            if st.get("stage") != "verify"]


def _attack(prediction: str | None, targets: list[str]) -> bool:
    return bool(prediction) and any(attack_success(prediction, t) for t in targets)


def _rate(name: str, values: list[bool]) -> dict[str, Any]:
    if not values:
        return {name: None, f"{name}_ci": None}
    return {name: sum(values) / len(values),
            f"{name}_ci": list(wilson_interval(sum(values), len(values)))}


def summarize_dirs(paths: Sequence[str | Path], data_dir: str | None = None) -> list[dict]:
    """`summarize` for every hostile run at or under `paths`, in order."""
    settings: dict[str, HostileSetting] = {}
    out = []
    for run_dir in find_run_dirs(paths):
        run = load_run(run_dir)
        name = run.sweep.get("setting")
        if not name:
            continue  # not a hostile run
        if name not in settings:
            settings[name] = build_setting(name, data_dir)
        out.append(summarize(run, settings[name]))
    return out


def render_markdown(summaries: Sequence[dict[str, Any]]) -> str:
    """Two tables: accuracy / attack / decisions per run, and cost per decision path."""
    def pct(value: float | None, ci: Sequence[float] | None = None) -> str:
        if value is None:
            return "—"
        text = f"{100 * value:.1f}"
        return text + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "")

    lines = [("| setting | retrieval | pipeline | n | accuracy | attack success | PASS / REPAIR / "
              "FALLBACK | interventions | fixed / broken (p) | draft = vanilla accuracy | "
              "draft = vanilla attack success | unreadable (items) |"),
             "|---|---|---|---:|---|---|---|---:|---|---|---|---:|"]
    for s in summaries:
        verified = "interventions" in s
        d = s["decisions"]
        lines.append(
            f"| {s['setting']} | {s['retrieval']} | {s['method']} | {s['n']} | "
            f"{pct(s['accuracy'], s['accuracy_ci'])} | "
            f"{pct(s['attack_success'], s['attack_success_ci'])} | "
            + (f"{d.get('PASS', 0)} / {d.get('REPAIR', 0)} / {d.get('FALLBACK', 0)} | "
               f"{pct(s['interventions'])} | {s['fixed']} / {s['broken']}"
               + (f" ({s['mcnemar_p']:.2g})" if s["mcnemar_p"] is not None else "") + " | "
               f"{pct(s['draft_accuracy'], s['draft_accuracy_ci'])} | "
               f"{pct(s['draft_attack_success'], s['draft_attack_success_ci'])} | "
               f"{s['unparsable_judgements']} ({s['items_with_unparsable']}) |"
               if verified else "— | — | — | — | — | — |"))
    lines += ["", ("| setting | retrieval | pipeline | path | items | LLM calls | prompt tokens | "
                   "completion tokens | seconds |"), "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for s in summaries:
        for path in sorted(s["cost_by_path"], key=lambda p: (p not in PATHS, p)):
            c = s["cost_by_path"][path]
            count = s["n"] if path == DRAFT_PATH else s["decisions"].get(path, 0)
            lines.append(f"| {s['setting']} | {s['retrieval']} | {s['method']} | {path} | "
                         f"{count} | {c.get('llm_calls', 0):.1f} | "
                         f"{c.get('prompt_tokens', 0):.0f} | {c.get('completion_tokens', 0):.0f} | "
                         f"{c.get('seconds', 0):.1f} |")
    groups = [s for s in summaries if s.get("by_kb_source")]
    if groups:
        lines += ["", ("| setting | retrieval | pipeline | kb source | n | accuracy | "
                       "attack success |"), "|---|---|---|---|---:|---|---|"]
        for s in groups:
            for name, g in s["by_kb_source"].items():
                lines.append(f"| {s['setting']} | {s['retrieval']} | {s['method']} | {name} | "
                             f"{g['n']} | {pct(g['accuracy'], g['accuracy_ci'])} | "
                             f"{pct(g['attack_success'], g['attack_success_ci'])} |")
    return "\n".join(lines) + "\n"

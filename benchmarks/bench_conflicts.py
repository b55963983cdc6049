"""How well does the conflict report flag real conflicts? Precision and recall on labelled data.

Every measurement runs plain RAG (`method = vanilla`) with the detection-only stage
(`detect = conflicts`, faithrag/methods/conflict_detector.py) as configured, on the dev split,
items in file order (`passages`: in turn per source), `--limit N` per class, caches off
(`use_cache = false`), greedy decoding.
Passages are given to the pipeline directly (no retrieval step), so both variants of an item
differ only in the evidence below.

memory      context vs memory, with the detector's memory check on (`conflicts.memory_check`,
            off in the defaults). KRE items (`--dataset kre_musique` or `kre_squad`), free-form
            question. Positive: the item's `context` (it contradicts the memorised answer).
            Negative: its golden, non-conflicting context (`meta.golden_context`). Items
            without a golden context are skipped. Flag: the `context_vs_memory` check.
passages    passage vs passage. Ranking items (`--dataset kre_conflict_rank` or
            `ramdocs_rank`) with at least one contrary passage and one relevant (relevance
            > 0, not contrary) passage; others are skipped; the items are taken in turn from
            each source of the set (kre_conflict_rank: MuSiQue, SQuAD), each source's rows
            summarised apart too. Positive: the first `-k` passages
            in the set's order; when none of them is contrary (or none relevant), the first
            such passage of the item takes the place of the last passage of the window that is
            neither (order kept), so both sides of the conflict are in it. Negative: the
            positive passages with the contrary ones taken out. Flag: `passage_vs_passage` or
            `ambiguous`; a second row `passage_vs_passage` alone (ramdocs_rank's items mostly
            have several valid answers, which stay in the negative variant).
ambiguity   RAMDocs (`ramdocs`) items with two or more gold answers (positive) and with one
            (negative), each class up to `--limit` (run alternately), each with all its own
            documents, with the same-subject check on (`conflicts.same_subject_check`, off in
            the defaults; `surface` runs with it too). Flag: `ambiguous`; and
            `passage_vs_passage` with its own label (positive: the item holds a misinformation
            document, which contradicts the correct ones about the same subject; negative: it
            holds none); and both kinds as one flag, what the defaults report as
            `passage_vs_passage` (positive: several gold answers or a misinformation
            document; negative: one answer and no misinformation document). An item that
            `surface` already ran is read from that run (the same plain RAG and detect step
            on the same passages), so run `surface` first.
poisoning   hostile vs clean retrieval of a hostile setting (`--setting poisonedrag`,
            `kre_musique`, `kre_squad`, `ramdocs` or `numeric`; faithrag/eval/hostile_settings.py,
            its default k). Clean: BM25 over the setting's clean corpus; hostile: the same with
            the question's poison on top (HostileRetriever). Positive: hostile; negative: clean.
            Flag: any check; a second row leaves `low_relevance` out (clean retrieval of a
            PoisonedRAG question without clean evidence finds unrelated passages); a third
            counts the passage flags alone (`numeric`'s poison is a copy of a clean passage with
            another value, so it disagrees with that passage when both are retrieved).
lookalike   items of a QA set (`popqa` or `hotpotqa_distractor`) with their own passages and
            `--distractors N` lookalike passages of other items (faithrag.eval.distractors: the
            most similar by BM25 that hold none of the item's answers): negatives only. Flag:
            `passage_vs_passage` or `ambiguous`; a second row any check. Its figure is the
            false-alarm rate.
surface     RAMDocs answered two ways on the same items, from one run per item. surface:
            vanilla with detect and on_conflict=surface; plain RAG: the same run's answer
            before the policy (`resolved_answer`; the detect step runs after the answer and
            changes nothing, so it is plain RAG's answer). Strict criterion (RAMDocs'): the
            answer contains every gold answer and no wrong answer (SQuAD-normalised token
            containment, faithrag.answers.containment); wrong answers are the misinfo
            documents' `doc_answer`s that are not also a gold answer. RAMDocs' document labels
            also score the sides: the share of misinformation documents that a passage
            conflict put on a side holding no correct document.

replay      the detect step of recorded runs (`--records FILE`, records of the commands above)
            on the current code, each model reply read back from its record (the closed-book
            reply with its recorded confidence, each passage's reading, the same-subject
            log-odds): no model is loaded. A record whose run never asked for a reply the
            current code asks for (a passage it did not read, a pair it did not judge) is not
            replayable. Writes OUT/replay.jsonl (per record: the conflicts, sides and checks
            found, the readings asked for, whether the closed-book question was asked) and
            prints, per data set, how many outcomes equal the recorded ones and the readings
            asked for against those recorded, so a rule that needs no model call is measured
            on every recorded run; run it on two checkouts and compare their replay.jsonl for
            what a change alone does. Each record replays with its measurement's checks.

Splits: `--offset M` skips the first M items (pairs for `passages`; file positions for
`ambiguity` and `surface`, so both read one range): thresholds are chosen on the first items
(`thresholds` prints each flag at candidate values from a run's records) and reported on the
items after them.

A flag over several kinds is "conflict" when any of them says conflict, else "could not tell"
when any could not tell, else "no conflict". Items whose flag could not tell are counted apart
(per class) and left out of precision and recall: they are never a "no conflict".

Each record (one item x variant, or item x way for `surface`) is appended to OUT/records.jsonl;
a re-run skips what is there. Records hold no gold answer, only what is derived from one
(memory: `recalls_golden`; surface: `strict`, and `plain_strict` in the surface run's), so
they can be kept beside the code. The summary (printed as markdown, and OUT/summary.json)
covers every measurement in OUT/records.jsonl: per data set and flag, over all items and over
the subsets that test the label's premise (memory: the items whose closed-book answer is the
golden answer; poisoning: the PoisonedRAG questions with clean evidence in the corpus, and
the numeric setting's KRE-SQuAD and RAMDocs questions apart), and
over all its data sets, n positive / n negative, could not tell per class,
precision and recall with 95 % Wilson intervals, and the seconds of the detect step against the
generate step of the same runs; for `surface`, the strict share per way with Wilson intervals
and the paired difference surface - plain (bootstrap interval, exact McNemar p).

    python benchmarks/bench_conflicts.py memory --dataset kre_musique --limit 100 --out runs/conflicts
    python benchmarks/bench_conflicts.py summary --out runs/conflicts
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from faithrag import Pipeline
from faithrag.answers import containment, same_answer, smart_em
from faithrag.config import ConflictsConfig
from faithrag.eval.datasets import QAItem, RankItem, load_dataset
from faithrag.eval.distractors import DistractorPool
from faithrag.eval.hostile import HostileRetriever
from faithrag.eval.hostile_settings import SETTINGS, build_setting
from faithrag.eval.stats import paired_difference, wilson_interval
from faithrag.eval.suite_slices import passage_window, wrong_answers
from faithrag.llm.base import LLM, ChoiceRequest, ChoiceScores, Completion
from faithrag.llm.fake import FakeLLM
from faithrag.methods.conflict_detector import HOLDS_DRAFT, NOT_READ, ConflictDetector
from faithrag.pipeline import Result, configure
from faithrag.retrieval import InMemoryRetriever
from faithrag.types import CONFLICT_KINDS, Answer, Passage, Question, Trace

COMMANDS = ("memory", "passages", "ambiguity", "poisoning", "lookalike", "surface")
# RAMDocs' misinformation documents contradict its correct ones about the same subject: the
# label of this flag's row is whether the item holds one, not whether it has several answers
MISINFORMATION_FLAG = "passage_vs_passage (positive: a misinformation document)"
# without the same-subject check (the defaults) every disagreement `ambiguous` would have been
# is `passage_vs_passage`, so this row is the defaults' passage_vs_passage: its documents give
# different answers when the item has several gold answers or a misinformation document
DISAGREEMENT_FLAG = ("passage_vs_passage or ambiguous (positive: several answers or a "
                     "misinformation document)")
FLAG_LABELS: dict[str, Callable[[dict[str, Any]], int]] = {
    MISINFORMATION_FLAG: lambda r: int(r.get("misinfo", 0) > 0),
    DISAGREEMENT_FLAG: lambda r: int(r["label"] == 1 or r.get("misinfo", 0) > 0)}
# the flags each measurement summarises: name -> the kinds whose "conflict" raises it
FLAGS: dict[str, dict[str, tuple[str, ...]]] = {
    # the golden variant is clean evidence that agrees: every kind's false alarms count there
    "memory": {"context_vs_memory": ("context_vs_memory",), "any check": tuple(CONFLICT_KINDS)},
    # RAMDocs items keep their several valid readings when the contrary passages are taken
    # out: "ambiguous" is right there, so the second row counts only a conflict of one subject
    "passages": {"passage_vs_passage or ambiguous": ("passage_vs_passage", "ambiguous"),
                 "passage_vs_passage": ("passage_vs_passage",)},
    "ambiguity": {"ambiguous": ("ambiguous",), MISINFORMATION_FLAG: ("passage_vs_passage",),
                  DISAGREEMENT_FLAG: ("passage_vs_passage", "ambiguous"),
                  "any check": tuple(CONFLICT_KINDS)},
    "poisoning": {"any check": tuple(CONFLICT_KINDS),
                  "any but low_relevance": tuple(k for k in CONFLICT_KINDS
                                                 if k != "low_relevance"),
                  # the numeric setting's poison disagrees with the clean passage it copies
                  "passage_vs_passage or ambiguous": ("passage_vs_passage", "ambiguous")},
    # negatives only: the item's own passages and lookalike distractors
    "lookalike": {"passage_vs_passage or ambiguous": ("passage_vs_passage", "ambiguous"),
                  "any check": tuple(CONFLICT_KINDS)},
}
# the runs of `surface`; plain RAG is read from the surface run (see the module docstring)
WAYS: dict[str, dict[str, str]] = {
    "surface": {"method": "vanilla", "detect": "conflicts", "on_conflict": "surface"},
}
SURFACE_SHARES = ("plain", "surface")  # the strict shares `surface` reports
DETECT = {"method": "vanilla", "detect": "conflicts"}
# the opt-in checks a measurement turns on: `memory` measures the closed-book check, `surface`
# and `ambiguity` (which reads surface runs) the same-subject check, as `ambiguous` needs it
CHECKS: dict[str, dict[str, bool]] = {
    "memory": {"memory_check": True},
    "surface": {"same_subject_check": True}, "ambiguity": {"same_subject_check": True}}


# subsets summarised in rows of their own, besides all items: name -> whether a record is in it
SUBSETS: dict[str, dict[str, Callable[[dict[str, Any]], bool]]] = {
    # the label assumes the model memorised the golden answer; these items show it did
    "memory": {"closed-book answer = golden answer": lambda r: bool(r.get("recalls_golden")),
               # the model cannot know: its closed-book answer is not the golden one
               "closed-book answer ≠ golden answer": lambda r: not r.get("recalls_golden")},
    # clean evidence that agrees: no misinformation document among the item's own
    "ambiguity": {"no misinformation document": lambda r: r.get("misinfo") == 0},
    # PoisonedRAG questions whose clean evidence is in the corpus (the others' clean top-k is
    # unrelated text)
    "poisoning": {"clean evidence in corpus": lambda r: r.get("kb_source") == "context",
                  # the numeric setting's sources: RAMDocs questions have several valid answers,
                  # so their clean top-k holds passages that rightly disagree
                  "KRE-SQuAD items": lambda r: r["item"].startswith("kre_squad::"),
                  "RAMDocs items": lambda r: r["item"].startswith("ramdocs::")},
    # kre_conflict_rank's two sources: multi-hop questions, then single-hop ones
    "passages": {"MuSiQue items": lambda r: r["item"].startswith("kre_musique::"),
                 "SQuAD items": lambda r: r["item"].startswith("kre_squad::")},
}
ALL_SETS = "all sets"  # the data set of a measurement's row over every data set it ran on
DEFAULT_DATASET = {"memory": "kre_musique", "passages": "kre_conflict_rank",
                   "ambiguity": "ramdocs", "poisoning": "poisonedrag", "lookalike": "popqa",
                   "surface": "ramdocs"}
DATASETS = {"memory": ("kre_musique", "kre_squad"),
            "passages": ("kre_conflict_rank", "ramdocs_rank"),
            "ambiguity": ("ramdocs",), "poisoning": SETTINGS,
            "lookalike": ("popqa", "hotpotqa_distractor"), "surface": ("ramdocs",)}


@dataclass
class Case:
    """One question with the evidence of one variant; `label` 1 = the evidence holds the
    conflict, 0 = it does not (None for `surface`, scored by `golds` and `wrongs`)."""

    dataset: str
    item: str
    variant: str
    question: str
    passages: list[Passage]
    label: int | None
    golds: list[str] = field(default_factory=list)
    wrongs: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- variants

def memory_cases(dataset: str, limit: int, data_dir: str | None, offset: int = 0
                 ) -> list[Case]:
    """Per KRE item with a golden context, after the first `offset` such items: its conflicting
    context (1) and golden context (0)."""
    cases: list[Case] = []
    usable = [item for item in _qa_items(dataset, data_dir)
              if item.meta.get("golden_context") and isinstance(item.context, str)]
    for item in usable[offset:]:
        golden = item.meta["golden_context"]
        golds = [item.meta["golden_answer"]] if item.meta.get("golden_answer") else []
        cases.append(Case(dataset, item.id, "conflicting", item.question, item.passages(), 1,
                          golds))
        cases.append(Case(dataset, item.id, "golden", item.question,
                          [Passage(f"{item.id}#golden", golden, source="context")], 0, golds))
        if len(cases) == 2 * limit:
            break
    return cases


def passages_cases(dataset: str, limit: int, data_dir: str | None, k: int, offset: int = 0
                   ) -> list[Case]:
    """Per ranking item: the window with its contrary passages (1) and without them (0). The
    items are taken in turn from each source of the set, file order within a source
    (kre_conflict_rank holds its MuSiQue items, then its SQuAD items), after the first
    `offset` pairs of that order."""
    by_source: dict[str, list[list[Case]]] = {}
    for item in load_dataset(dataset, data_dir).items:
        assert isinstance(item, RankItem)
        window = passage_window(item, k)
        if window is None:
            continue
        clean = [p for p in window if not p.meta["is_contrary"]]
        extra = {"contrary": sum(p.meta["is_contrary"] for p in window)}
        by_source.setdefault(item.source, []).append([
            Case(dataset, item.id, "with_contrary", item.query, window, 1, extra=extra),
            Case(dataset, item.id, "without_contrary", item.query, clean, 0, extra=extra)])
    in_turn = itertools.chain.from_iterable(itertools.zip_longest(*by_source.values()))
    pairs = [pair for pair in in_turn if pair is not None][offset:offset + limit]
    return [case for pair in pairs for case in pair]


def ambiguity_cases(limit: int, data_dir: str | None, offset: int = 0) -> list[Case]:
    """RAMDocs items with several gold answers (1) and with one (0), the first `limit` of each
    in file order from item `offset` on (the `surface` measurement's offset, so that both
    read the same items), the two classes alternating (the set puts most items with several
    answers first; alternating keeps a run stopped early balanced)."""
    classes: dict[int, list[Case]] = {1: [], 0: []}
    for item in _qa_items("ramdocs", data_dir)[offset:]:
        label = int(len(item.answers) > 1)
        if len(classes[label]) < limit:
            classes[label].append(
                Case("ramdocs", item.id, "several_answers" if label else "one_answer",
                     item.question, item.passages(), label, golds=list(item.answers),
                     extra=document_labels(item)))
    pairs = itertools.zip_longest(classes[1], classes[0])
    return [case for pair in pairs for case in pair if case is not None]


def poisoning_cases(setting_name: str, limit: int, data_dir: str | None,
                    offset: int = 0) -> list[Case]:
    """Per question of the hostile setting (`limit` of them after the first `offset`): its
    hostile top-k (1) and its clean top-k (0)."""
    setting = build_setting(setting_name, data_dir)
    clean = InMemoryRetriever(setting.dataset.corpus(), mode="bm25")
    hostile = HostileRetriever(clean, setting.poison)
    cases = []
    for item in setting.dataset.items[offset:offset + limit]:
        extra = {"kb_source": item.meta.get("kb_source"), "k": setting.k}
        cases.append(Case(setting_name, item.id, "hostile", item.question,
                          hostile.retrieve(item.question, setting.k), 1, list(item.answers),
                          setting.targets(item), extra))
        cases.append(Case(setting_name, item.id, "clean", item.question,
                          clean.retrieve(item.question, setting.k), 0, list(item.answers),
                          setting.targets(item), extra))
    return cases


def lookalike_cases(dataset: str, limit: int, data_dir: str | None, distractors: int,
                    offset: int = 0) -> list[Case]:
    """Items of a QA set (after the first `offset`) with their own passages and `distractors`
    lookalike passages of other items (faithrag.eval.distractors: the most similar by BM25
    that do not hold the item's answer): no conflict (0)."""
    data = load_dataset(dataset, data_dir)
    pool = DistractorPool(data)
    items = [i for i in data.items if isinstance(i, QAItem)][offset:offset + limit]
    return [Case(dataset, item.id, f"distractors_{distractors}", item.question,
                 item.passages() + pool.select(item, distractors), 0, list(item.answers))
            for item in items]


def document_labels(item: QAItem) -> dict[str, Any]:
    """RAMDocs' label of each document (correct / misinfo / noise) by passage id, and the
    number of misinformation documents."""
    labels = {p.id: p.meta.get("doc_type") for p in item.passages()}
    return {"doc_types": labels, "misinfo": sum(t == "misinfo" for t in labels.values())}


def surface_cases(limit: int, data_dir: str | None, offset: int = 0) -> list[Case]:
    """`limit` RAMDocs items after the first `offset`, each with all its documents."""
    return [Case("ramdocs", item.id, "own_documents", item.question, item.passages(), None,
                 list(item.answers), wrong_answers(item), document_labels(item))
            for item in _qa_items("ramdocs", data_dir)[offset:offset + limit]]


def _qa_items(dataset: str, data_dir: str | None) -> list[QAItem]:
    items = load_dataset(dataset, data_dir).items
    return [i for i in items if isinstance(i, QAItem)]


def build_cases(command: str, dataset: str, limit: int, data_dir: str | None, k: int,
                offset: int = 0, distractors: int = 16) -> list[Case]:
    if command == "memory":
        return memory_cases(dataset, limit, data_dir, offset)
    if command == "passages":
        return passages_cases(dataset, limit, data_dir, k, offset)
    if command == "ambiguity":
        return ambiguity_cases(limit, data_dir, offset)
    if command == "poisoning":
        return poisoning_cases(dataset, limit, data_dir, offset)
    if command == "lookalike":
        return lookalike_cases(dataset, limit, data_dir, distractors, offset)
    return surface_cases(limit, data_dir, offset)


# ---------------------------------------------------------------- running

def strict_correct(answer: str, golds: Iterable[str], wrongs: Iterable[str]) -> bool:
    """RAMDocs' strict criterion: every gold answer is contained and no wrong answer is."""
    golds = list(golds)
    return (bool(golds) and all(containment(answer, [g]) for g in golds)
            and not any(containment(answer, [w]) for w in wrongs))


def step_seconds(result: Result, stage: str) -> float:
    return round(sum(s.seconds for s in result.trace.steps if s.stage == stage), 6)


def step_tokens(result: Result, stage: str) -> list[int]:
    """[prompt, completion] tokens of the stage's steps."""
    steps = [s for s in result.trace.steps if s.stage == stage]
    return [sum(s.prompt_tokens for s in steps), sum(s.completion_tokens for s in steps)]


def record_of(command: str, case: Case, way: str | None, result: Result) -> dict[str, Any]:
    detect = next((s for s in result.trace.steps if s.stage == "detect"), None)
    record = {
        "command": command, "dataset": case.dataset, "item": case.item, "variant": case.variant,
        "way": way, "label": case.label, "passages": [p.id for p in case.passages],
        "checks": {c.kind: c.status for c in result.conflict_checks},
        "conflicts": [c.kind for c in result.conflicts],
        # who is on which side: [kind, [[answer, passage ids] per side]] per conflict
        "sides": [[c.kind, [[s.answer, s.passages] for s in c.sides]]
                  for c in result.conflicts],
        "answer": result.answer.text, "parse_status": result.answer.parse_status,
        "generate_seconds": step_seconds(result, "generate"),
        "detect_seconds": step_seconds(result, "detect"),
        "seconds": round(result.trace.totals()["seconds"], 4),
        "generate_tokens": step_tokens(result, "generate"),
        "detect_tokens": step_tokens(result, "detect"),
        "llm_calls": result.trace.totals()["llm_calls"],
        # what the detector read: memory, each passage's reply, groups, judgement (raw replies)
        "detector": ({"memory": detect.outputs.get("memory", {}).get("answer"),
                      "outputs": detect.outputs, "warnings": detect.warnings}
                     if detect is not None else None),
        **case.extra,
    }
    # derived from the gold answers, which records leave out (they stay in the data set)
    if command == "memory":
        memory = (record["detector"] or {}).get("memory") or ""
        record["recalls_golden"] = bool(memory and case.golds and smart_em(memory, case.golds))
    if command == "surface":
        record["strict"] = strict_correct(result.answer.text, case.golds, case.wrongs)
        if way == "surface":
            plain = result.answer.meta.get("resolved_answer", result.answer.text)
            record["plain_answer"] = plain
            record["plain_strict"] = strict_correct(plain, case.golds, case.wrongs)
    return record


def record_key(record: dict[str, Any]) -> tuple:
    return (record["command"], record["dataset"], record["item"], record["variant"],
            record.get("way"))


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ambiguity_from_surface(case: Case, surface: dict[str, Any]) -> dict[str, Any] | None:
    """The ambiguity record of `case` read from the surface run of the same RAMDocs item (the
    same passages, vanilla and detect; its policy step only rewrites the answer afterwards),
    or None when that run read other passages."""
    if surface["passages"] != [p.id for p in case.passages]:
        return None
    kept = ("passages", "checks", "conflicts", "sides", "parse_status", "generate_seconds",
            "detect_seconds", "seconds", "generate_tokens", "detect_tokens", "llm_calls",
            "detector")
    return {"command": "ambiguity", "dataset": case.dataset, "item": case.item,
            "variant": case.variant, "way": None, "label": case.label,
            **{key: surface[key] for key in kept}, "answer": surface["plain_answer"],
            **case.extra, "from_run": "surface"}


def run(command: str, cases: list[Case], llm: LLM, settings: dict[str, Any], out: Path,
        progress: Callable[[str], None]) -> None:
    """Append a record per case (x way for `surface`) not yet in out/records.jsonl;
    `settings` are configure() keywords applied to every pipeline (model, threads, caches).
    An `ambiguity` case whose item has a surface run in the records is read from it."""
    path = out / "records.jsonl"
    records = read_records(path)
    done = {record_key(r) for r in records}
    surfaced = {r["item"]: r for r in records
                if r["command"] == "surface" and r["way"] == "surface"}
    checks = {f"conflicts__{name}": on for name, on in CHECKS.get(command, {}).items()}
    ways = {way: {**stages, **checks}
            for way, stages in (WAYS if command == "surface" else {None: DETECT}).items()}
    pipelines = {way: Pipeline.from_parts(configure(None, plain=True, **settings, **stages), llm)
                 for way, stages in ways.items()}
    with path.open("a") as sink:
        for number, case in enumerate(cases):
            for way, pipeline in pipelines.items():
                key = (command, case.dataset, case.item, case.variant, way)
                if key in done:
                    continue
                record = (ambiguity_from_surface(case, surfaced[case.item])
                          if command == "ambiguity" and case.item in surfaced else None)
                if record is None:
                    result = pipeline.run(Question(case.question, id=case.item),
                                          case.passages)
                    record = record_of(command, case, way, result)
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                progress(f"{number + 1}/{len(cases)} {case.item} {case.variant} {way or ''} "
                         f"{record['seconds']:.1f} s checks={record['checks']}")


# ---------------------------------------------------------------- replay

UNREAD = (HOLDS_DRAFT, NOT_READ)  # what a record holds for a passage it did not read


class NotRecorded(Exception):
    """The current code asks the model for a reply the recorded run never asked for."""


class RecordedReplies(FakeLLM):
    """The replies of one recorded detect step, read back by what each request asks."""

    def __init__(self, outputs: dict[str, Any], shown: list[str]):
        self.outputs, self.shown = outputs, shown

        def reply(request: Any) -> str:
            if request.purpose == "memory_answer":
                if "memory" not in outputs:
                    raise NotRecorded("no closed-book reply")
                return outputs["memory"]["raw"]
            number = self._numbers(request)[-1]
            read = outputs["passages"].get(shown[number - 1])
            if read is None or read["raw"] in UNREAD:
                raise NotRecorded(f"no reading of {shown[number - 1]}")
            return read["raw"]
        super().__init__(reply)

    def generate(self, requests: Any) -> list[Completion]:
        confidence = self.outputs.get("memory", {}).get("confidence")
        return [replace(c, token_logprobs=[confidence] * max(1, len(c.token_logprobs)))
                if r.purpose == "memory_answer" and confidence is not None else c
                for r, c in zip(requests, super().generate(requests))]

    @staticmethod
    def _numbers(request: Any) -> list[int]:
        """The passage numbers the request's instruction quotes, in order."""
        return [int(n) for n in re.findall(r'Passage (\d+) begins: "',
                                           request.messages[-1].content)]

    def score_choices(self, request: ChoiceRequest) -> ChoiceScores:
        same = self.outputs.get("same_subject")
        pair = {self.shown[n - 1] for n in self._numbers(request)[-2:]}
        if same is None or pair != set(same["pair"]):
            raise NotRecorded("no same-subject judgement of this pair")
        return replace(super().score_choices(request), logprobs=[same["log_odds"], 0.0])


def replay(records: list[dict[str, Any]], data_dir: str | None, k: int, out: Path) -> str:
    """The detect step of each record on the current code (see `replay` above); `k`: the
    `passages` runs' window."""
    cases: dict[tuple, Case] = {}
    lines, rows = [], {}
    for record in records:
        if not record.get("detector") or record["command"] not in COMMANDS:
            continue
        command, dataset = record["command"], record["dataset"]
        if (command, dataset, record["item"], record["variant"]) not in cases:
            distractors = int(record["variant"].rsplit("_", 1)[1]) if command == "lookalike" \
                else 16
            cases.update({(command, dataset, c.item, c.variant): c for c in build_cases(
                command, dataset, 10_000, data_dir, k, 0, distractors)})
        case = cases[(command, dataset, record["item"], record["variant"])]
        outputs = record["detector"]["outputs"]
        given = {p.id: p for p in case.passages}
        shown = [given[pid] for pid in outputs["passages"]]
        llm = RecordedReplies(outputs, [p.id for p in shown])
        trace = Trace()
        row = rows.setdefault((command, dataset), Counter())
        try:
            found = ConflictDetector(llm, **CHECKS.get(command, {})).detect(
                Question(case.question, id=case.item), shown,
                Answer(record.get("plain_answer", record["answer"])), trace)
        except NotRecorded:
            row["not replayable"] += 1
            continue
        (step,) = trace.steps
        kinds = sorted(c.kind for c in found)
        asked = sum(1 for c in llm.calls if getattr(c, "purpose", "") == "passage_answer")
        row["replayed"] += 1
        row["as recorded"] += kinds == sorted(record["conflicts"])
        row["readings recorded"] += sum(r["raw"] not in UNREAD
                                        for r in outputs["passages"].values())
        row["readings asked"] += asked
        lines.append(json.dumps({
            "command": command, "dataset": dataset, "item": record["item"],
            "variant": record["variant"], "label": record.get("label"), "conflicts": kinds,
            "sides": sorted([c.kind, sorted(s.answer for s in c.sides)] for c in found),
            "checks": {c.kind: c.status for c in step.checks}, "readings": asked,
            "closed_book": any(getattr(c, "purpose", "") == "memory_answer"
                               for c in llm.calls)}) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    (out / "replay.jsonl").write_text("".join(lines))
    table = [("| command | data set | replayed | not replayable | outcome as recorded | "
              "readings asked / recorded |"), "|---|---|---:|---:|---:|---|"]
    table += [f"| {command} | {dataset} | {r['replayed']} | {r['not replayable']} | "
              f"{r['as recorded']} | {r['readings asked']} / {r['readings recorded']} |"
              for (command, dataset), r in rows.items()]
    return "\n".join(table)


# ---------------------------------------------------------------- summaries

def flag_status(checks: dict[str, str], kinds: Iterable[str]) -> str | None:
    """"conflict" if any of `kinds` says conflict, else "could_not_tell" if any could not
    tell, else "no_conflict"; None when no check of those kinds was made."""
    statuses = [checks[k] for k in kinds if k in checks]
    if not statuses:
        return None
    for status in ("conflict", "could_not_tell"):
        if status in statuses:
            return status
    return "no_conflict"


def share(successes: int, n: int) -> dict[str, Any]:
    """successes / n with its 95 % Wilson interval (None values when n = 0)."""
    if n == 0:
        return {"value": None, "ci": None, "k": 0, "n": 0}
    low, high = wilson_interval(successes, n)
    return {"value": round(successes / n, 4), "ci": [round(low, 4), round(high, 4)],
            "k": successes, "n": n}


def timing(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds of the detect and generate steps, per record and as a ratio of the sums."""
    generate = sum(r["generate_seconds"] for r in records)
    detect = sum(r["detect_seconds"] for r in records)
    n = len(records)
    return {"generate_s_per_item": round(generate / n, 3) if n else None,
            "detect_s_per_item": round(detect / n, 3) if n else None,
            "detect_over_generate": round(detect / generate, 3) if generate else None}


def detection_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per measurement, data set, subset (all items, then SUBSETS) and flag: confusion counts,
    precision and recall (decided items only), could-not-tell and missing checks per class,
    and timing. A subset keeps an item's two variants together when both are in it. A
    measurement run on several data sets also gets a row over all of them ("all sets"): the
    detector's figure; its subsets only where they span several sets (else they repeat one
    set's row)."""
    rows = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        if r["command"] in FLAGS:
            groups.setdefault((r["command"], r["dataset"]), []).append(r)
    for command in dict.fromkeys(command for command, _ in groups):
        datasets = [group for (c, _), group in groups.items() if c == command]
        if len(datasets) > 1:
            groups[command, ALL_SETS] = [r for group in datasets for r in group]
    for (command, dataset), group in groups.items():
        subsets: dict[str, list[dict[str, Any]]] = {"all": group}
        for name, member in SUBSETS.get(command, {}).items():
            items = {r["item"] for r in group if member(r)}
            subset = [r for r in group if r["item"] in items]
            within_one_set = dataset == ALL_SETS and len({r["dataset"] for r in subset}) == 1
            if subset and len(subset) < len(group) and not within_one_set:
                subsets[name] = subset
        for subset_name, subset in subsets.items():
            for flag, kinds in FLAGS[command].items():
                rows.append(confusion_row(command, dataset, subset_name, flag, kinds, subset))
    return rows


def confusion_row(command: str, dataset: str, subset: str, flag: str, kinds: tuple[str, ...],
                  records: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {(label, status): 0 for label in (0, 1)
              for status in ("conflict", "no_conflict", "could_not_tell", None)}
    label = FLAG_LABELS.get(flag, lambda r: r["label"])
    for r in records:
        counts[label(r), flag_status(r["checks"], kinds)] += 1
    tp, fn = counts[1, "conflict"], counts[1, "no_conflict"]
    fp, tn = counts[0, "conflict"], counts[0, "no_conflict"]
    return {
        "command": command, "dataset": dataset, "subset": subset, "flag": flag,
        "n_positive": sum(label(r) == 1 for r in records),
        "n_negative": sum(label(r) == 0 for r in records),
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "could_not_tell_positive": counts[1, "could_not_tell"],
        "could_not_tell_negative": counts[0, "could_not_tell"],
        "no_check": counts[1, None] + counts[0, None],
        "precision": share(tp, tp + fp), "recall": share(tp, tp + fn),
        "false_alarm": share(fp, fp + tn),
        **timing(records),
    }


def surface_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per data set: the strict share of plain RAG, resolve and surface over the items both
    runs answered, and the paired difference surface - plain."""
    rows = []
    by_dataset: dict[str, dict[str, dict[str, bool]]] = {}
    for r in records:
        if r["command"] == "surface":
            ways = by_dataset.setdefault(r["dataset"], {})
            ways.setdefault(r["way"], {})[r["item"]] = r["strict"]
            if r["way"] == "surface":
                ways.setdefault("plain", {})[r["item"]] = r["plain_strict"]
    for dataset, ways in by_dataset.items():
        items = sorted(set.intersection(*(set(ways.get(w, {})) for w in WAYS)))
        row: dict[str, Any] = {"command": "surface", "dataset": dataset, "n": len(items)}
        for way in SURFACE_SHARES:
            row[way] = share(sum(ways[way][i] for i in items), len(items)) if items else None
        row["surface_minus_plain"] = (
            paired_difference([ways["surface"][i] for i in items],
                              [ways["plain"][i] for i in items]) if items else None)
        timed = [r for r in records if r["command"] == "surface" and r["dataset"] == dataset
                 and r["way"] == "surface" and r["item"] in set(items)]
        row["misinfo_own_side"] = misinformation_on_own_side(timed)
        row.update(timing(timed))
        rows.append(row)
    return rows


def misinformation_on_own_side(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Of the misinformation documents of `records`' items (RAMDocs' labels), the share that a
    passage conflict put on a side holding no correct document."""
    total = found = 0
    for r in records:
        types = r.get("doc_types") or {}
        misinfo = {pid for pid, t in types.items() if t == "misinfo"}
        total += len(misinfo)
        own = set()
        for kind, sides in r.get("sides", []):
            if kind in ("passage_vs_passage", "ambiguous"):
                for _, ids in sides:
                    if ids and not any(types.get(pid) == "correct" for pid in ids):
                        own |= misinfo & set(ids)
        found += len(own)
    return share(found, total)


def _fmt(s: dict[str, Any] | None) -> str:
    if not s or s["value"] is None:
        return "—"
    return f"{s['value']:.2f} [{s['ci'][0]:.2f}, {s['ci'][1]:.2f}] ({s['k']}/{s['n']})"


def render(detection: list[dict[str, Any]], surface: list[dict[str, Any]]) -> str:
    lines = []
    if detection:
        lines += [("| measurement | data | items | flag | n pos / neg | precision [95 %] | "
                  "recall [95 %] | false alarms [95 %] | could not tell pos / neg | "
                  "detect / generate s per item |"),
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in detection:
            lines.append(
                f"| {r['command']} | {r['dataset']} | {r['subset']} | {r['flag']} | "
                f"{r['n_positive']} / "
                f"{r['n_negative']} | {_fmt(r['precision'])} | {_fmt(r['recall'])} | "
                f"{_fmt(r['false_alarm'])} | "
                f"{r['could_not_tell_positive']} / {r['could_not_tell_negative']} | "
                f"{r['detect_s_per_item']} / {r['generate_s_per_item']} "
                f"(× {r['detect_over_generate']}) |")
    if surface:
        lines += ["", ("| data | n | plain | surface | surface − plain [95 %] | McNemar p | "
                  "misinformation documents on a side of their own | "
                  "detect / generate s per item |"), "|---|---|---|---|---|---|---|---|"]
        for r in surface:
            d = r["surface_minus_plain"]
            diff = (f"{d['difference']:+.2f} [{d['difference_ci'][0]:+.2f}, "
                    f"{d['difference_ci'][1]:+.2f}]" if d else "—")
            lines.append(
                f"| {r['dataset']} | {r['n']} | {_fmt(r['plain'])} | "
                f"{_fmt(r['surface'])} | {diff} | {d['mcnemar_p'] if d else '—'} | "
                f"{_fmt(r['misinfo_own_side'])} | "
                f"{r['detect_s_per_item']} / {r['generate_s_per_item']} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- thresholds

def memory_signal(record: dict[str, Any]) -> tuple[bool, float | None]:
    """Whether the closed-book answer differs from the context's answer (the largest group),
    and its confidence, from a record's detector outputs."""
    outputs = record["detector"]["outputs"]
    memory, groups = outputs["memory"], outputs["groups"]
    if memory["status"] != "answer" or not groups:
        return False, memory.get("confidence")
    context = max(groups, key=lambda g: len(g[1]))[0]
    return not same_answer(memory["answer"], context), memory.get("confidence")


def passage_signal(record: dict[str, Any], subject_coverage: float) -> tuple[int, float | None]:
    """The number of answer groups left on-subject at `subject_coverage` (the context's group,
    judged by its best passage, stays when its coverage was not recorded) and the recorded
    same-subject log-odds."""
    outputs = record["detector"]["outputs"]
    subject = outputs.get("question_subject") or {}
    judged, context = subject.get("coverage", {}), subject.get("context", 1.0)
    left = sum(1 for _, ids in outputs["groups"]
               if judged.get(ids[0], context) >= subject_coverage)
    return left, (outputs.get("same_subject") or {}).get("log_odds")


def dissent_signal(record: dict[str, Any], least_logprob: float) -> list[tuple[bool, bool]]:
    """Per dissenting answer group of a `surface` record (on-subject at the default
    subject_coverage; the context's left out: the largest group, on a tie the plain answer's,
    else the earliest): whether it holds a correct or misinformation document (RAMDocs'
    labels; else it was read from noise alone), and whether one of its passages was read with
    its reply's least likely token at `least_logprob` or above (a passage not read, as it
    holds the draft, counts as read above it)."""
    outputs, types = record["detector"]["outputs"], record["doc_types"]
    judged = (outputs.get("question_subject") or {}).get("coverage", {})
    coverage = ConflictsConfig().subject_coverage
    groups = [(answer, ids) for answer, ids in outputs["groups"]
              if ids[0] not in judged or judged[ids[0]] >= coverage]
    if not groups:
        return []
    size = max(len(ids) for _, ids in groups)
    largest = [g for g in groups if len(g[1]) == size]
    context = next((g for g in largest if same_answer(g[0], record["plain_answer"])), largest[0])

    def sure(pid: str) -> bool:
        least = outputs["passages"][pid].get("least_logprob")
        return least is None or least >= least_logprob

    return [(any(types.get(pid) in ("correct", "misinfo") for pid in g[1]), any(map(sure, g[1])))
            for g in groups if g is not context]


def threshold_table(records: list[dict[str, Any]]) -> str:
    """The flags recomputed from the recorded signals at each candidate threshold (the
    calibration split's records): memory_confidence on `memory` (positives: the conflicting
    variant of items whose closed-book answer is the golden one; negatives: every golden
    variant and the conflicting variant of the others); subject_coverage on the passage flag
    (positives: `passages` and `ambiguity` positives; negatives: `lookalike`);
    same_subject_threshold on `ambiguous` (`ambiguity`: several answers against one, at the
    default subject_coverage). The same-subject log-odds is recorded only where a pair was
    left, so its rows hold at the coverage the records were made with. Last, a candidate gate
    no setting has: the share of dissenting answers (`surface` records) that would stand if a
    dissent needed a passage read with its least likely token at the value or above, for
    dissents holding a RAMDocs document against those read from noise alone."""
    lines = ["| setting | value | positives flagged | negatives flagged |", "|---|---|---|---|"]

    def row(name: str, value: float, pos: list[bool], neg: list[bool]) -> None:
        lines.append(f"| {name} | {value} | {_fmt(share(sum(pos), len(pos)))} | "
                     f"{_fmt(share(sum(neg), len(neg)))} |")

    memory = [r for r in records if r["command"] == "memory"]
    for t in (-2.0, -1.5, -1.0, -0.75, -0.5, -0.35, -0.25, -0.15, -0.1, -0.05):
        pos, neg = [], []
        for r in memory:
            differs, confidence = memory_signal(r)
            flagged = differs and confidence is not None and confidence >= t
            (pos if r["label"] == 1 and r.get("recalls_golden") else neg).append(flagged)
        row("memory_confidence", t, pos, neg)
    positives = [r for r in records if r["command"] in ("passages", "ambiguity")
                 and r["label"] == 1]
    lookalike = [r for r in records if r["command"] == "lookalike"]
    for t in (0.0, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0):
        row("subject_coverage", t,
            [passage_signal(r, t)[0] >= 2 for r in positives],
            [passage_signal(r, t)[0] >= 2 for r in lookalike])
    ambiguity = [r for r in records if r["command"] == "ambiguity"]
    coverage = ConflictsConfig().subject_coverage
    for t in (-1.0, -0.5, 0.0, 0.25, 0.4, 0.5, 0.6, 0.75, 1.0, 1.5):
        flags = []
        for r in ambiguity:
            left, odds = passage_signal(r, coverage)
            flags.append((r["label"], left >= 2 and odds is not None and odds < t))
        row("same_subject_threshold", t, [f for label, f in flags if label == 1],
            [f for label, f in flags if label == 0])
    surface = [r for r in records if r["command"] == "surface" and r["way"] == "surface"]
    for t in (-8.0, -6.0, -4.0, -3.0, -2.5, -2.0, -1.5, -1.0, -0.75, -0.5):
        groups = [g for r in surface for g in dissent_signal(r, t)]
        row("reading's least token log-prob (dissent: from a document / from noise alone)", t,
            [kept for document, kept in groups if document],
            [kept for document, kept in groups if not document])
    return "\n".join(lines)


def summarize(out: Path) -> str:
    records = read_records(out / "records.jsonl")
    detection, surface = detection_rows(records), surface_rows(records)
    (out / "summary.json").write_text(
        json.dumps({"detection": detection, "surface": surface}, indent=1) + "\n")
    return render(detection, surface)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=(*COMMANDS, "summary", "thresholds", "replay"),
                        help="the measurement to run ('summary': summarise --out only; "
                             "'thresholds': the flags at candidate thresholds, from --out's "
                             "records; 'replay': --records' detect steps on this code)")
    parser.add_argument("--records", type=Path, default=None,
                        help="replay: a records.jsonl of earlier runs")
    parser.add_argument("--dataset", default=None,
                        help="memory: kre_musique|kre_squad; passages: kre_conflict_rank|"
                             "ramdocs_rank; poisoning: a hostile setting "
                             f"({', '.join(SETTINGS)})")
    parser.add_argument("--model", default="default", help="model preset or .gguf path")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--limit", type=int, default=100, help="items per class")
    parser.add_argument("--offset", type=int, default=0,
                        help="skip the first M items (pairs for passages): the calibration "
                             "split is the first items, the evaluation split the ones after it")
    parser.add_argument("--distractors", type=int, default=16,
                        help="lookalike: distractor passages added to each item's own")
    parser.add_argument("-k", type=int, default=5,
                        help="passages: the window of candidates (replay: the runs' window)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "thresholds":
        print(threshold_table(read_records(args.out / "records.jsonl")))
        return
    if args.command == "replay":
        if args.records is None or not args.records.is_file():
            parser.error("replay needs --records FILE (a records.jsonl of earlier runs)")
        print(replay(read_records(args.records), args.data_dir, args.k, args.out))
        return
    if args.command != "summary":
        dataset = args.dataset or DEFAULT_DATASET[args.command]
        if dataset not in DATASETS[args.command]:
            parser.error(f"--dataset for {args.command}: one of "
                         f"{', '.join(DATASETS[args.command])}")
        if args.limit < 1 or args.k < 1:
            parser.error("--limit and -k must be >= 1")
        if args.offset < 0 or args.distractors < 0:
            parser.error("--offset and --distractors must be >= 0")
        cases = build_cases(args.command, dataset, args.limit, args.data_dir, args.k,
                            args.offset, args.distractors)
        settings = {"model": args.model, "llm__n_threads": args.threads, "use_cache": False}
        from faithrag.llm import load_llm
        llm = load_llm(configure(None, **settings).llm)
        args.out.mkdir(parents=True, exist_ok=True)
        run(args.command, cases, llm, settings, args.out,
            lambda line: print(line, file=sys.stderr, flush=True))
    print(summarize(args.out))


if __name__ == "__main__":
    main()

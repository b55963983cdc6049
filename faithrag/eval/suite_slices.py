"""The slices of the mixed conflict suite (faithrag/eval/suite.py): which dev items, with which
evidence, scored how.

Every slice is built from the dev split of the shared data, in a fixed order, then sampled
with a seeded RNG (`sample_items`). Items on which a stage's thresholds were chosen are left
out of the pool: the conflict detector's calibration items (the first 30 KRE items with a
golden context, the first 30 kre_conflict_rank pairs, RAMDocs file positions 0-105) and the
poisoning filter's (hostile-setting items from the 101st on), so every figure is on items
nothing was tuned on.

Slices (`kind`: "conflict" = the evidence holds a conflict; "hard_negative" = it does not,
but looks as if it might; "clean" = nothing conflicts):

| slice | kind | evidence | correct |
|---|---|---|---|
| ramdocs | conflict | a RAMDocs item with misinformation or several answers: its own documents | every gold answer, no misinformation answer (RAMDocs' strict criterion) |
| kre_passages | conflict | kre_conflict_rank: the reference passage, its contrary edit and distractors (5) | the reference's answer, not the contrary one |
| faitheval | conflict | FaithEval counterfactual: the counterfactual context, four options | the option the context supports |
| poisonedrag_hostile | conflict | PoisonedRAG's poison on top of BM25 over the clean corpus (k = 5) | a gold answer, not the attacker's target |
| kre_squad_hostile | conflict | KRE-SQuAD's misleading context on top of BM25 over the golden contexts (k = 2) | likewise |
| numeric_hostile | conflict | a clean passage copied with another number or date, on top (k = 3) | likewise, by value |
| hotpotqa_lookalike | hard_negative | HotpotQA's two supporting paragraphs and its first three distractor paragraphs | a gold answer |
| kre_squad_golden | clean | KRE-SQuAD's golden context alone | its golden answer |
| ramdocs_clean | clean | a RAMDocs item with one answer and no misinformation document | RAMDocs' strict criterion |
| poisonedrag_clean | clean | BM25 over the clean corpus, for questions whose evidence is in it | a gold answer |
| hotpotqa_clean | clean | HotpotQA's two supporting paragraphs | a gold answer |

Free-form questions are asked without options. An answer "states" a text by
faithrag.answers.attack_success (containment by words or by value; a yes/no text by smart EM
only), the rule of the hostile harness, for gold answers and wrong ones alike.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from faithrag.answers import attack_success, normalize_answer
from faithrag.errors import ConfigError
from faithrag.eval.datasets import QAItem, RankItem, load_dataset
from faithrag.eval.hostile import HostileRetriever
from faithrag.eval.hostile_settings import build_setting
from faithrag.retrieval import InMemoryRetriever
from faithrag.types import Passage, Question

SliceKind = Literal["conflict", "hard_negative", "clean"]
# the items a stage was tuned on, left out of every pool (see the module docstring)
DETECTOR_CALIBRATION = {"kre_golden": 30, "kre_conflict_rank_pairs": 30, "ramdocs": 106}
FILTER_TUNING_FROM = 100  # the poisoning filter's thresholds were chosen on hostile items 101+
KRE_PASSAGE_WINDOW = 5
HOTPOTQA_DISTRACTORS = 3


@dataclass
class SuiteItem:
    """One question of a slice with its evidence and what scores it; `golds` are all needed
    when `all_golds`, any one otherwise; `wrongs` must not be stated; `gold_index` scores a
    multiple-choice question instead."""

    slice: str
    id: str
    question: Question
    passages: list[Passage]
    golds: list[str]
    wrongs: list[str] = field(default_factory=list)
    all_golds: bool = False
    gold_index: int | None = None


def states(answer: str, text: str) -> bool:
    """The answer gives `text` (the hostile harness's rule: faithrag.answers.attack_success)."""
    return bool(text.strip()) and attack_success(answer, text)


def gold_given(item: SuiteItem, answer: str, choice_index: int | None) -> bool:
    if item.gold_index is not None:
        return choice_index == item.gold_index
    found = [states(answer, gold) for gold in item.golds]
    return bool(found) and (all(found) if item.all_golds else any(found))


def wrong_given(item: SuiteItem, answer: str) -> bool:
    return item.gold_index is None and any(states(answer, wrong) for wrong in item.wrongs)


def strict_correct(answer: str, golds: Sequence[str], wrongs: Sequence[str]) -> bool:
    """RAMDocs' strict criterion with the suite's rule: every gold answer stated, no wrong."""
    item = SuiteItem("", "", Question(""), [], list(golds), list(wrongs), all_golds=True)
    return gold_given(item, answer, None) and not wrong_given(item, answer)


def wrong_answers(item: QAItem) -> list[str]:
    """A RAMDocs item's misinformation answers that are not also a gold answer, in order."""
    golds = {normalize_answer(g) for g in item.answers}
    docs = item.context if isinstance(item.context, list) else []
    answers = [d.doc_answer for d in docs if d.doc_type == "misinfo" and d.doc_answer]
    return [a for a in dict.fromkeys(answers) if normalize_answer(a) not in golds]


def _qa_items(name: str, data_dir: str | None) -> list[QAItem]:
    return [i for i in load_dataset(name, data_dir).items if isinstance(i, QAItem)]


def _ramdocs(data_dir: str | None, clean: bool) -> list[SuiteItem]:
    items = []
    for item in _qa_items("ramdocs", data_dir)[DETECTOR_CALIBRATION["ramdocs"]:]:
        wrongs = wrong_answers(item)
        misinfo = any(p.meta.get("doc_type") == "misinfo" for p in item.passages())
        if clean == (len(item.answers) == 1 and not misinfo):
            items.append(SuiteItem("ramdocs_clean" if clean else "ramdocs", item.id,
                                   Question(item.question, item.id), item.passages(),
                                   list(item.answers), wrongs, all_golds=True))
    return items


def passage_window(item: RankItem, k: int) -> list[Passage] | None:
    """The first `k` candidates in the set's order holding the contrary passage and a relevant
    one: when the window lacks either, the first such passage takes the place of the window's
    last passage that is neither (order kept); None when the item has no such passage."""
    passages = item.as_passages()

    def contrary(p: Passage) -> bool:
        return bool(p.meta["is_contrary"])

    def relevant(p: Passage) -> bool:
        return p.meta["relevance"] > 0 and not contrary(p)

    window = passages[:k]
    for wanted in (contrary, relevant):
        if any(wanted(p) for p in window):
            continue
        first = next((p for p in passages if wanted(p)), None)
        if first is None:
            return None
        spare = [i for i, p in enumerate(window) if not contrary(p) and not relevant(p)]
        if spare:
            window = window[:spare[-1]] + window[spare[-1] + 1:]
        elif len(window) >= k:
            return None  # k too small to hold both sides
        window = sorted(window + [first], key=passages.index)
    return window


def in_turn_by_source(items: Sequence[RankItem]) -> list[RankItem]:
    """Items taken in turn from each source of the set, file order within a source."""
    by_source: dict[str, list[RankItem]] = {}
    for item in items:
        by_source.setdefault(item.source, []).append(item)
    return [i for i in itertools.chain.from_iterable(itertools.zip_longest(*by_source.values()))
            if i is not None]


def _kre_passages(data_dir: str | None) -> list[SuiteItem]:
    usable = []
    for item in load_dataset("kre_conflict_rank", data_dir).items:
        assert isinstance(item, RankItem)
        window = passage_window(item, KRE_PASSAGE_WINDOW)
        if window is not None and item.meta.get("golden_answer"):
            usable.append((item, window))
    order = {id(item): n for n, item in enumerate(in_turn_by_source([i for i, _ in usable]))}
    usable.sort(key=lambda pair: order[id(pair[0])])
    return [SuiteItem("kre_passages", item.id, Question(item.query, item.id), window,
                      [item.meta["golden_answer"]],
                      [item.meta["contrary_answer"]] if item.meta.get("contrary_answer") else [])
            for item, window in usable[DETECTOR_CALIBRATION["kre_conflict_rank_pairs"]:]]


def _faitheval(data_dir: str | None) -> list[SuiteItem]:
    return [SuiteItem("faitheval", item.id, item.as_question(), item.passages(),
                      list(item.answers), gold_index=item.answer_idx)
            for item in _qa_items("faitheval_counterfactual", data_dir)
            if item.choices and item.answer_idx is not None]


def _hostile(setting_name: str, slice_name: str, data_dir: str | None, hostile: bool,
             keep: Callable[[QAItem], bool] = lambda item: True) -> list[SuiteItem]:
    setting = build_setting(setting_name, data_dir)
    clean = InMemoryRetriever(setting.dataset.corpus(), mode="bm25")
    retriever = HostileRetriever(clean, setting.poison) if hostile else clean
    return [SuiteItem(slice_name, item.id, Question(item.question, item.id),
                      retriever.retrieve(item.question, setting.k), list(item.answers),
                      setting.targets(item))
            for item in setting.dataset.items[:FILTER_TUNING_FROM] if keep(item)]


def _kre_golden(data_dir: str | None) -> list[SuiteItem]:
    usable = [item for item in _qa_items("kre_squad", data_dir)
              if item.meta.get("golden_context") and item.meta.get("golden_answer")]
    return [SuiteItem("kre_squad_golden", item.id, Question(item.question, item.id),
                      [Passage(f"{item.id}#golden", item.meta["golden_context"],
                               source="context")],
                      [item.meta["golden_answer"]])
            for item in usable[DETECTOR_CALIBRATION["kre_golden"]:]]


def _hotpotqa(data_dir: str | None, distractors: int, slice_name: str) -> list[SuiteItem]:
    items = []
    for item in _qa_items("hotpotqa_distractor", data_dir):
        passages = item.passages()
        supporting = [p for p in passages if p.meta.get("is_supporting")]
        others = [p for p in passages if not p.meta.get("is_supporting")][:distractors]
        if len(supporting) == 2 and len(others) == distractors:
            chosen = {p.id for p in supporting + others}
            items.append(SuiteItem(slice_name, item.id, Question(item.question, item.id),
                                   [p for p in passages if p.id in chosen], list(item.answers)))
    return items


@dataclass(frozen=True)
class SliceSpec:
    kind: SliceKind
    build: Callable[[str | None], list[SuiteItem]]


SLICES: dict[str, SliceSpec] = {
    "ramdocs": SliceSpec("conflict", lambda d: _ramdocs(d, clean=False)),
    "kre_passages": SliceSpec("conflict", _kre_passages),
    "faitheval": SliceSpec("conflict", _faitheval),
    "poisonedrag_hostile": SliceSpec("conflict", lambda d: _hostile(
        "poisonedrag", "poisonedrag_hostile", d, hostile=True)),
    "kre_squad_hostile": SliceSpec("conflict", lambda d: _hostile(
        "kre_squad", "kre_squad_hostile", d, hostile=True)),
    "numeric_hostile": SliceSpec("conflict", lambda d: _hostile(
        "numeric", "numeric_hostile", d, hostile=True)),
    "hotpotqa_lookalike": SliceSpec("hard_negative", lambda d: _hotpotqa(
        d, HOTPOTQA_DISTRACTORS, "hotpotqa_lookalike")),
    "kre_squad_golden": SliceSpec("clean", _kre_golden),
    "ramdocs_clean": SliceSpec("clean", lambda d: _ramdocs(d, clean=True)),
    "poisonedrag_clean": SliceSpec("clean", lambda d: _hostile(
        "poisonedrag", "poisonedrag_clean", d, hostile=False,
        keep=lambda item: item.meta.get("kb_source") == "context")),
    "hotpotqa_clean": SliceSpec("clean", lambda d: _hotpotqa(d, 0, "hotpotqa_clean")),
}


def check_slices(names: Sequence[str]) -> list[str]:
    unknown = [n for n in names if n not in SLICES]
    if unknown or not names:
        raise ConfigError(f"Unknown suite slice(s): {', '.join(unknown) or '(none given)'}",
                          f"--slices takes a comma-separated list of {', '.join(SLICES)}.")
    return list(dict.fromkeys(names))


def _sample(pool: list[SuiteItem], count: int, seed: str) -> list[SuiteItem]:
    return random.Random(seed).sample(pool, min(count, len(pool)))


def sample_items(names: Sequence[str], per_slice: int, seed: int, data_dir: str | None,
                 skip: int = 0) -> list[SuiteItem]:
    """`per_slice` items of each slice (all of a smaller pool), sampled with `seed`, then
    interleaved slice by slice so that a run stopped early has every slice. `skip` leaves out
    the items of the sample with `per_slice=skip` (the same seed): with per_slice 45 and skip
    30, a second sample of up to 15 items per slice that a 30-per-slice run never saw (fewer
    where the pool is smaller)."""
    chosen = []
    for name in check_slices(names):
        pool = SLICES[name].build(data_dir)
        seen = {item.id for item in _sample(pool, skip, f"{seed}:{name}")}
        chosen.append([item for item in _sample(pool, per_slice, f"{seed}:{name}")
                       if item.id not in seen])
    return [item for group in itertools.zip_longest(*chosen) for item in group
            if item is not None]

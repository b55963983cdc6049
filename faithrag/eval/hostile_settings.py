"""Real-data hostile-retrieval settings, built from the shared evaluation data (dev split).

A setting gives, per question: its clean documents (what an honest retriever over the untrusted
corpus can find), its poisoned documents (injected into the top-k by
faithrag.eval.hostile.HostileRetriever), the gold answers and the poison's target answers; and,
for the whole setting, the documents of the trusted knowledge base. The untrusted corpus is the
union of all questions' clean documents, searched as one index (retrieval over the whole set,
`faithrag eval --context retrieval`); the knowledge base is a separate index. Questions are
answered free-form: the accuracy is containment of a gold answer, the attack succeeds when the
answer gives a target (faithrag.answers.attack_success).

kre_musique, kre_squad (KRE, FaithfulRAG's processed copy)
    Clean document: the item's golden context (`meta.golden_context`). Poison: its misleading
    context (the item's `context`), one passage. Gold: the golden answer (`meta.golden_answer`);
    target: the answer the misleading context supports (the item's `answer`). Trusted knowledge
    base: every item's golden context. The four options are not shown. The knowledge base and
    the clean corpus hold the same texts: the knowledge base is the clean knowledge, the attack
    is on the retriever. Default: k = 2, the poison at rank 0 (contexts run to ~260 words; on
    clean retrieval the golden context is usually the top hit, so the attack puts the poison
    above it).
ramdocs (RAMDocs)
    Only questions with at least one `misinfo` document (166 of the 350 dev items). Clean
    documents: the `correct` and `noise` documents. Poison: the `misinfo` documents (1-3).
    Gold: every gold answer (several are valid, one per disambiguated entity); targets: the
    misinfo documents' answers. Trusted knowledge base: every item's `correct` documents.
    Default: k = 5, the poison at the top ranks.
poisonedrag (PoisonedRAG targeted attack texts)
    Poison: the item's five poisoned passages. Gold: `answer`; target:
    `meta.target_incorrect_answer`. The set ships no clean passage, so the true answer is taken
    from, in order:
    1. "context": a context from another shared set whose question is the same (SQuAD-
       normalised, "?" dropped) and that contains a gold answer: hotpotqa_distractor (its
       supporting paragraphs; all ten paragraphs join the clean corpus), cofaithfulqa_nq and
       cofaithfulqa_hotpotqa (their context). 42 of the 185 dev questions (37 from
       hotpotqa_distractor, 5 from cofaithfulqa_nq); the count is recomputed and reported in
       `notes`.
    2. "answer_card": otherwise (143 questions) a card made from the item's own fields,
       "Question: ... Answer: ...", in the trusted knowledge base only. This is an oracle
       knowledge base: report the two groups apart (`meta.kb_source`).
    The clean corpus holds only the documents of (1); the other questions' clean retrieval
    finds unrelated passages. Default: k = 5, all five poisoned passages at ranks 0-4 (the
    PoisonedRAG threat model: the top-5 is the attacker's).

numeric (faithrag.eval.numeric_setting)
    Questions whose gold answer is a number or a date (KRE-SQuAD, RAMDocs); the poison changes
    only the value. Scored by value: `metric` is "numeric_containment". Default: k = 3.

A question text that occurs twice in a set keeps its first item (poison is looked up by the
query text); the count dropped is in `notes`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from faithrag.answers import containment, normalize_answer
from faithrag.errors import ConfigError
from faithrag.eval.datasets import ContextDoc, Dataset, QAItem, load_dataset
from faithrag.eval.numeric_setting import build_numeric
from faithrag.types import Passage

SETTINGS = ("kre_musique", "kre_squad", "ramdocs", "poisonedrag", "numeric")
SETTING_VERSION = "1"  # bump when a builder changes what it produces
DEFAULT_K = {"kre_musique": 2, "kre_squad": 2, "ramdocs": 5, "poisonedrag": 5, "numeric": 3}
POISONEDRAG_SOURCES = ("hotpotqa_distractor", "cofaithfulqa_nq", "cofaithfulqa_hotpotqa")


@dataclass
class HostileSetting:
    name: str
    dataset: Dataset  # free-form items: answers = gold, context = the clean documents
    poison: Mapping[str, list[Passage]]  # by question text (an attack may write it lazily)
    trusted: list[Passage]  # documents of the trusted knowledge base (not chunked)
    k: int
    notes: dict[str, Any] = field(default_factory=dict)
    metric: str = "containment"  # what "correct" means: a faithrag.eval.runner metric

    def targets(self, item: QAItem) -> list[str]:
        return list(item.meta.get("target_incorrect_answer") or [])


def build_setting(name: str, data_dir: str | None = None) -> HostileSetting:
    builders = {"kre_musique": _kre, "kre_squad": _kre, "ramdocs": _ramdocs,
                "poisonedrag": _poisonedrag, "numeric": _numeric}
    if name not in builders:
        raise ConfigError(f"Unknown hostile setting '{name}'.",
                          f"Choose one of {', '.join(SETTINGS)}.")
    return builders[name](name, data_dir)


def _qa(source: QAItem, gold: list[str], targets: list[str], clean: list[ContextDoc],
        **meta: Any) -> QAItem:
    return QAItem(id=source.id, source=source.source, question=source.question,
                  context=clean or None, answer=gold[0], answers=gold,
                  meta={"target_incorrect_answer": targets, **meta})


def _poison(item: QAItem, texts: list[tuple[str, str]]) -> list[Passage]:
    return [Passage(f"{item.id}#p{i}", text, title, "context")
            for i, (title, text) in enumerate(texts)]


def _assemble(name: str, sources: list[Dataset], rows: list[tuple[QAItem, list[Passage]]],
              trusted: list[Passage], notes: dict[str, Any]) -> HostileSetting:
    items, poison, duplicates = [], {}, 0
    for item, poisoned in rows:
        if item.question in poison:
            duplicates += 1
            continue
        items.append(item)
        poison[item.question] = poisoned
    digest = hashlib.sha256(
        ("\n".join([SETTING_VERSION] + [s.sha256 for s in sources])).encode()).hexdigest()
    dataset = Dataset(name=f"hostile_{name}", path=sources[0].path, split=sources[0].split,
                      kind="qa", sha256=digest, items=items)
    notes = {"items": len(items), "duplicate_questions_dropped": duplicates,
             "trusted_documents": len(trusted), **notes}
    return HostileSetting(name, dataset, poison, trusted, DEFAULT_K[name], notes)


def _kre(name: str, data_dir: str | None) -> HostileSetting:
    source = load_dataset(name, data_dir)
    rows, trusted = [], []
    for item in source.items:
        golden, gold = item.meta["golden_context"], item.meta["golden_answer"]
        rows.append((_qa(item, [gold], [item.answer], [ContextDoc(golden)]),
                     _poison(item, [("", item.context)])))
        trusted.append(Passage(f"kb:{item.id}", golden, source=f"{name}:trusted"))
    return _assemble(name, [source], rows, trusted, {})


def _ramdocs(name: str, data_dir: str | None) -> HostileSetting:
    source = load_dataset(name, data_dir)
    rows, trusted, without = [], [], 0
    for item in source.items:
        misinfo = [d for d in item.context if d.doc_type == "misinfo"]
        if not misinfo:
            without += 1
            continue
        clean = [d for d in item.context if d.doc_type != "misinfo"]
        targets = list(dict.fromkeys(d.doc_answer for d in misinfo if d.doc_answer))
        rows.append((_qa(item, list(item.answers), targets, clean),
                     _poison(item, [(d.title, d.text) for d in misinfo])))
        trusted.extend(Passage(f"kb:{item.id}#{i}", d.text, d.title, f"{name}:trusted")
                       for i, d in enumerate(clean) if d.doc_type == "correct")
    return _assemble(name, [source], rows, trusted, {"items_without_misinfo_skipped": without})


def _question_key(text: str) -> str:
    return normalize_answer(text).rstrip("?").strip()


def _poisonedrag(name: str, data_dir: str | None) -> HostileSetting:
    source = load_dataset(name, data_dir)
    others = [load_dataset(n, data_dir) for n in POISONEDRAG_SOURCES]
    wanted = {_question_key(i.question): i for i in source.items}
    evidence: dict[str, tuple[str, list[ContextDoc], list[ContextDoc]]] = {}
    for other in others:
        for candidate in other.items:
            item = wanted.get(_question_key(candidate.question))
            if item is None or item.id in evidence:
                continue
            if isinstance(candidate.context, str):
                docs = [ContextDoc(candidate.context)]
                holding = docs
            else:
                docs = [ContextDoc(d.text, d.title) for d in candidate.context or []]
                holding = [ContextDoc(d.text, d.title)
                           for d in candidate.context or [] if d.is_supporting]
            if holding and containment(" ".join(d.text for d in holding), item.answers):
                evidence[item.id] = (other.name, docs, holding)
    rows, trusted, by_source = [], [], {}
    for item in source.items:
        target = [item.meta["target_incorrect_answer"]]
        poison = _poison(item, [(d.title, d.text) for d in item.context])
        if item.id in evidence:
            origin, docs, holding = evidence[item.id]
            rows.append((_qa(item, list(item.answers), target, docs, kb_source="context",
                             evidence_from=origin), poison))
            trusted.extend(Passage(f"kb:{item.id}#{i}", d.text, d.title, f"{name}:trusted")
                           for i, d in enumerate(holding))
            by_source[origin] = by_source.get(origin, 0) + 1
        else:
            rows.append((_qa(item, list(item.answers), target, [], kb_source="answer_card"),
                         poison))
            trusted.append(Passage(f"kb:{item.id}#card",
                                   f"Question: {item.question}\nAnswer: {item.answer}",
                                   "answer card", f"{name}:trusted"))
    notes = {"kb_source_context": len(evidence), "kb_source_answer_card":
             len(source.items) - len(evidence), "context_from": by_source}
    return _assemble(name, [source, *others], rows, trusted, notes)


def _numeric(name: str, data_dir: str | None) -> HostileSetting:
    sources, rows, trusted, notes = build_numeric(data_dir)
    setting = _assemble(name, sources, rows, trusted, notes)
    setting.metric = "numeric_containment"
    return setting

"""Attackers who adapt to a poisoning filter: each rewrites a hostile setting's poison so that the
signs faithrag.methods.poison_filter looks for are weaker (`faithrag hostile run --attack`).

standard
    The setting's own poison, unchanged.
single
    Only the first poisoned passage: no cluster can form.
padded
    Each poisoned passage is set inside a different real passage of the setting's clean corpus
    (its first half, the poison, its second half), so the copies no longer read alike and sit
    further from the question. The clean passage is picked by a hash of the item and the copy,
    never one of the item's own clean documents.
reworded
    Every word the poison shares with the question is dropped (stop words and the target
    answer's words are kept), so the copies repeat the question's wording less; a passage that
    would lose all its words stays as it was.
The harness still puts the rewritten passages at the top of the retrieval: the attacks weaken
the filter's signals, not the poison's rank.

Example:
    >>> from faithrag.types import Passage
    >>> reword("Who wrote Hamlet?", Passage("p", "Hamlet was written by Marlowe."), ["Marlowe"]).text
    'was written by Marlowe.'
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace

from faithrag.errors import ConfigError
from faithrag.eval.hostile_settings import HostileSetting
from faithrag.types import Passage

ATTACKS = ("standard", "single", "padded", "reworded")
_STOP = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "been", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "how", "in", "is", "it", "its", "of", "on", "or", "the", "their",
    "this", "that", "to", "was", "were", "what", "when", "where", "which", "who", "whom",
    "whose", "why", "with"))
_WORD = re.compile(r"\w+")


def adapt(setting: HostileSetting, attack: str) -> HostileSetting:
    """`setting` with its poison rewritten by `attack` (module docstring)."""
    if attack not in ATTACKS:
        raise ConfigError(f"Unknown attack '{attack}'.", f"Choose one of {', '.join(ATTACKS)}.")
    if attack == "standard":
        return setting
    items = {item.question: item for item in setting.dataset.items}
    corpus = [p for p in setting.dataset.corpus() if p.text.split()]
    poison = {}
    for question, passages in setting.poison.items():
        item = items.get(question)
        targets = setting.targets(item) if item is not None else []
        if attack == "single":
            poison[question] = list(passages[:1])
        elif attack == "padded":
            own = {d.text for d in (item.context or [])} if item is not None else set()
            hosts = [p for p in corpus if p.text not in own]
            if not hosts:
                raise ConfigError(f"The padded attack found no clean passage of another item "
                                  f"to pad the poison of {question!r} with.",
                                  "Use a setting with more items, or --attack single.")
            poison[question] = [pad(p, _pick(hosts, f"{question}#{i}")) for i, p in
                                enumerate(passages)]
        else:
            poison[question] = [reword(question, p, targets) for p in passages]
    notes = {**setting.notes, "attack": attack}
    return replace(setting, poison=poison, notes=notes)


def _pick(hosts: list[Passage], key: str) -> Passage:
    digest = int(hashlib.sha256(key.encode()).hexdigest()[:12], 16)
    return hosts[digest % len(hosts)]


def pad(passage: Passage, host: Passage) -> Passage:
    """`passage` set in the middle of `host`'s text."""
    host_words = host.text.split()
    half = len(host_words) // 2
    text = " ".join(host_words[:half] + passage.text.split() + host_words[half:])
    return Passage(passage.id, text, passage.title, passage.source, passage.score, passage.meta)


def reword(question: str, passage: Passage, targets: list[str]) -> Passage:
    """`passage` without the words it shares with `question` (stop words and the targets'
    words kept)."""
    keep = {w.lower() for t in targets for w in _WORD.findall(t)}
    drop = {w.lower() for w in _WORD.findall(question)} - _STOP - keep
    words = [w for w in passage.text.split()
             if not (_WORD.fullmatch(w.strip(".,;:!?\"'()")) and
                     w.strip(".,;:!?\"'()").lower() in drop)]
    if not words:
        return passage
    return Passage(passage.id, " ".join(words), passage.title, passage.source, passage.score,
                   passage.meta)

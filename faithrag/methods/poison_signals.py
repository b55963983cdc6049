"""Signs that passages were injected into a retrieval, read from the passages alone (no trusted
source, no LLM): the two shapes knowledge-poisoning attacks leave.

- **Crafted clusters** (`crafted_clusters`): text written *for the query* (PoisonedRAG's
  attack passages) comes in several copies that say one thing in different words: they sit
  close to each other and close to the question in embedding space, apart from what the
  retriever found on its own. A cluster is a connected group of at least `min_size` passages
  whose pairwise cosine reaches `similarity` (pairs that are copies of one text, see below,
  do not count: a copy is not a second voice), at a mean cosine of at least
  `query_similarity` to the question; a passage whose mean cosine to the cluster's members
  reaches `halo_similarity` joins it (a copy written a little apart from the others).
- **Altered copies** (`altered_copies`): one passage re-issued with its answer changed (an
  edited copy of a real document: KRE's misleading contexts, RAMDocs' misinformation, the
  `numeric` setting). Two passages are copies when aligned word by word (difflib) their
  matched words cover at least `copy_coverage` of the shorter; a copy is altered when some
  stretch of at most `max_edit_words` words was replaced by another, next to an unchanged run
  of at least `anchor_words` words, and the two differ in at most `max_edits` places (or in
  more, when the matched words also cover `rewrite_coverage` of the longer: a copy edited
  throughout, sentence by sentence, rather than two texts that share a paragraph). Two
  passages whose titles are both given and differ are different documents, never copies
  (templated pages: one season's article against the next).

Both return indices into the passage list and leave the decision to the caller
(faithrag.methods.poison_filter).

Example:
    >>> real = "The house was built in 1912 for David and Mary Jones, who lived there."
    >>> fake = "The house was built in 1895 for David and Mary Jones, who lived there."
    >>> [(p.first, p.second, p.edits) for p in altered_copies([real, fake], ["", ""])]
    [(0, 1, [('1912', '1895')])]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np

_WORD = re.compile(r"\d+(?:[.,]\d+)*|\w+")


def words(text: str) -> list[str]:
    """Lower-cased words; a number keeps its separators ("1,000", "3.5")."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class CopySettings:
    copy_coverage: float = 0.7
    max_edit_words: int = 12
    anchor_words: int = 5
    max_edits: int = 8
    rewrite_coverage: float = 0.85


@dataclass(frozen=True)
class AlteredPair:
    """Passages `first` and `second` are one text; `edits` holds each replaced stretch as
    (first's words, second's words)."""

    first: int
    second: int
    edits: list[tuple[str, str]]


def _copy_edits(a: list[str], b: list[str], settings: CopySettings) -> list[tuple[str, str]] | None:
    """The replaced stretches of an altered copy; [] for an unaltered copy; None when the two
    are not copies of one text."""
    if not a or not b:
        return None
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    matched = sum(block.size for block in matcher.get_matching_blocks())
    if matched / min(len(a), len(b)) < settings.copy_coverage:
        return None
    opcodes = matcher.get_opcodes()
    differences = [op for op in opcodes if op[0] != "equal"]
    if (len(differences) > settings.max_edits
            and matched / max(len(a), len(b)) < settings.rewrite_coverage):
        return None

    def anchored(index: int) -> bool:
        return (0 <= index < len(opcodes) and opcodes[index][0] == "equal"
                and opcodes[index][2] - opcodes[index][1] >= settings.anchor_words)

    edits = []
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if (tag == "replace" and i2 - i1 <= settings.max_edit_words
                and j2 - j1 <= settings.max_edit_words
                and (anchored(index - 1) or anchored(index + 1))):
            edits.append((" ".join(a[i1:i2]), " ".join(b[j1:j2])))
    return edits


def altered_copies(texts: Sequence[str], titles: Sequence[str],
                   settings: CopySettings = CopySettings()) -> list[AlteredPair]:
    """Every pair of passages that are one text with a stretch replaced (module docstring)."""
    tokens = [words(t) for t in texts]
    pairs = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if titles[i] and titles[j] and titles[i].strip().lower() != titles[j].strip().lower():
                continue
            edits = _copy_edits(tokens[i], tokens[j], settings)
            if edits:
                pairs.append(AlteredPair(i, j, edits))
    return pairs


def are_copies(first: str, second: str, settings: CopySettings = CopySettings()) -> bool:
    """Whether the two texts are copies of one text, altered or not."""
    return _copy_edits(words(first), words(second), settings) is not None


def connected_groups(nodes: Iterable[int], links: Iterable[tuple[int, int]]
                     ) -> list[list[int]]:
    """The connected components of `nodes` under `links`, each sorted, in order of their
    smallest node."""
    parent = {node: node for node in nodes}

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for a, b in links:
        parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for node in sorted(parent):
        groups.setdefault(root(node), []).append(node)
    return list(groups.values())


def crafted_clusters(question: np.ndarray, passages: np.ndarray, texts: Sequence[str], *,
                     similarity: float, query_similarity: float, min_size: int,
                     halo_similarity: float, copies: CopySettings = CopySettings()
                     ) -> list[list[int]]:
    """Groups of passages that look written for the question (module docstring). `question`
    and `passages` are unit-normalised embeddings (one row per passage)."""
    n = len(texts)
    if n < min_size:
        return []
    pairwise = passages @ passages.T
    to_question = passages @ question
    links = [(i, j) for i in range(n) for j in range(i + 1, n)
             if pairwise[i, j] >= similarity and not are_copies(texts[i], texts[j], copies)]
    clusters = [members for members in connected_groups(range(n), links)
                if len(members) >= min_size
                and float(np.mean(to_question[members])) >= query_similarity]
    taken = {i for members in clusters for i in members}
    for members in clusters:
        core = list(members)
        members.extend(j for j in range(n) if j not in taken
                       and float(np.mean(pairwise[j, core])) >= halo_similarity)
        members.sort()
        taken.update(members)
    return clusters

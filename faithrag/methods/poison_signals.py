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
- **Crafted stretches** (`windowed_clusters`): the same, read on overlapping windows of a few
  words (`windows`) instead of whole passages, for poison set inside longer real text: windows
  of different passages are linked at `similarity`, and a connected group of windows that spans
  at least `min_size` passages, at a mean cosine of at least `query_similarity` to the question,
  makes those passages a cluster; a passage with one window whose mean cosine to the group's
  windows reaches the halo threshold joins it.
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

All three return indices into the passage list and leave the decision to the caller
(faithrag.methods.poison_filter). `telling_edits` picks, among an altered pair's edits, those
that can tell its two versions apart (the conflict detector names each version by them).

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

from faithrag.answers import stopwords

_WORD = re.compile(r"\d+(?:[.,]\d+)*|\w+")
SPELLING_CHANGES = frozenset({("", "u"), ("", "l"), ("", "e"), ("", "r"), ("", "s"), ("", " "),
                              ("s", "z"), ("c", "s")})


def words(text: str) -> list[str]:
    """Lower-cased words; a number keeps its separators ("1,000", "3.5")."""
    return _WORD.findall(text.lower())


def stretch_in(text: str, stretch: str) -> str:
    """The first stretch of `text` whose `words` are `stretch`'s (one side of an edit), in the
    text's own case and punctuation; `stretch` itself when `text` has no such run.

    >>> stretch_in("Built in 1,912 by David Jones.", "1,912 by david")
    '1,912 by David'
    """
    wanted = stretch.split()
    found = list(_WORD.finditer(text))
    lowered = [m.group().lower() for m in found]
    for start in range(len(found) - len(wanted) + 1):
        if wanted and lowered[start:start + len(wanted)] == wanted:
            return text[found[start].start():found[start + len(wanted) - 1].end()]
    return stretch


@dataclass(frozen=True)
class CopySettings:
    copy_coverage: float = 0.7
    max_edit_words: int = 12
    anchor_words: int = 5
    max_edits: int = 8
    rewrite_coverage: float = 0.7


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


def altered_across(owners: Sequence[int], texts: Sequence[str], titles: Sequence[str]
                   ) -> set[tuple[int, int]]:
    """The pairs of owners (a, b), a < b, that hold two passages which are one text with a
    stretch replaced (`altered_copies`); `owners[i]` owns passage i, a pair within one owner
    does not count."""
    return {(min(owners[p.first], owners[p.second]), max(owners[p.first], owners[p.second]))
            for p in altered_copies(texts, titles) if owners[p.first] != owners[p.second]}


def spelling_variant(first: str, second: str) -> bool:
    """Whether the two sides of an edit are one wording spelt two ways ("honour" / "honor",
    "organise" / "organize", "centre" / "center", "per cent" / "percent"): no digit, and every
    letter they differ in is one of `SPELLING_CHANGES` (a "u", "l", "e", "r", "s" or space put in
    or left out; "s" for "z" or "c")."""
    if first == second or any(c.isdigit() for c in first + second):
        return False
    matcher = SequenceMatcher(None, first, second, autojunk=False)
    return all((first[i1:i2], second[j1:j2]) in SPELLING_CHANGES
               or (second[j1:j2], first[i1:i2]) in SPELLING_CHANGES
               for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")


def telling_edits(edits: Sequence[tuple[str, str]], answers: Iterable[str]
                  ) -> list[tuple[str, str]]:
    """The edits of an altered pair that can tell its two versions apart, for naming them:
    spelling variants and edits of stopwords alone ("its" / "their") left out; of the rest,
    those with a side holding a content word of one of `answers` (what the passages were read to
    say), else those holding a number, else all of them.

    >>> telling_edits([("honour", "honor"), ("built", "made"), ("1912", "1895")], [])
    [('1912', '1895')]
    >>> telling_edits([("in 1912", "in 1895"), ("terri irwin", "caitlin stasey")], ["Terri"])
    [('terri irwin', 'caitlin stasey')]
    """
    common = stopwords()
    edits = [(a, b) for a, b in edits if not spelling_variant(a, b)
             and any(w not in common for w in (a + " " + b).split())]
    answer_words = {w for answer in answers for w in words(answer) if w not in common}
    holding_answer = [e for e in edits if answer_words & set(" ".join(e).split())]
    with_number = [e for e in edits if any(c.isdigit() for c in e[0] + e[1])]
    return holding_answer or with_number or edits


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
    links = _alike_links(pairwise, range(n), texts, similarity, copies)
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


def _alike_links(pairwise: np.ndarray, owners: Sequence[int], texts: Sequence[str],
                 similarity: float, copies: CopySettings) -> list[tuple[int, int]]:
    """Pairs (a, b), a < b, of rows of `pairwise` (cosines) at `similarity` or above whose
    passages `owners[a]` and `owners[b]` differ and are not copies of one text."""
    copy_pairs: dict[tuple[int, int], bool] = {}

    def copied(a: int, b: int) -> bool:
        key = (min(a, b), max(a, b))
        if key not in copy_pairs:
            copy_pairs[key] = are_copies(texts[key[0]], texts[key[1]], copies)
        return copy_pairs[key]

    first, second = np.nonzero(np.triu(pairwise >= similarity, 1))
    return [(int(a), int(b)) for a, b in zip(first, second)
            if owners[a] != owners[b] and not copied(int(owners[a]), int(owners[b]))]


def windows(text: str, size: int, stride: int) -> list[str]:
    """Overlapping stretches of `size` whitespace-separated words, one every `stride` words and
    the last ending with the text; a text of at most `size` words is one window (none if empty).

    >>> windows("a b c d e f g", 4, 2)
    ['a b c d', 'c d e f', 'd e f g']
    """
    if size < 1 or stride < 1:
        raise ValueError("size and stride must be >= 1")
    tokens = text.split()
    if len(tokens) <= size:
        return [" ".join(tokens)] if tokens else []
    starts = list(range(0, len(tokens) - size + 1, stride))
    if starts[-1] != len(tokens) - size:
        starts.append(len(tokens) - size)
    return [" ".join(tokens[start:start + size]) for start in starts]


def windowed_clusters(question: np.ndarray, window_vectors: np.ndarray, owners: Sequence[int],
                      texts: Sequence[str], *, similarity: float, query_similarity: float,
                      min_size: int, halo_similarity: float | None = None,
                      copies: CopySettings = CopySettings()) -> list[list[int]]:
    """Groups of passages that share a stretch written for the question (module docstring).
    `window_vectors` holds unit-normalised embeddings of the passages' windows, `owners[w]` the
    index into `texts` of window w's passage; `question` is the question's unit-normalised embedding.
    Windows of one passage, or of two passages that are copies of one text, are never linked.
    With `halo_similarity`, a passage outside a group joins it when one of its windows reaches
    that mean cosine to the group's windows."""
    owners = np.asarray(owners, dtype=int)
    if len(owners) != len(window_vectors):
        raise ValueError("one owner per window")
    if len(set(owners.tolist())) < min_size:
        return []
    pairwise = window_vectors @ window_vectors.T
    to_question = window_vectors @ question
    links = _alike_links(pairwise, owners, texts, similarity, copies)
    found = []
    for group in connected_groups(range(len(window_vectors)), links):
        members = sorted({int(owners[w]) for w in group})
        if len(members) >= min_size and float(np.mean(to_question[group])) >= query_similarity:
            if halo_similarity is not None:
                near = pairwise[:, group].mean(axis=1) >= halo_similarity
                members = sorted(set(members) | {int(owners[w]) for w in np.nonzero(near)[0]})
            found.append(members)
    return merged_groups(found)


def merged_groups(groups: Sequence[Sequence[int]]) -> list[list[int]]:
    """`groups` with every two that share a member joined, each sorted.

    >>> merged_groups([[0, 1], [3, 4], [1, 2]])
    [[0, 1, 2], [3, 4]]
    """
    return connected_groups({i for group in groups for i in group},
                            [(group[0], other) for group in groups for other in group[1:]])

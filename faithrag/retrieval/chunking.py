"""Sentence-aware chunking with overlap.

A chunk holds at most `max_tokens` tokens and is made of whole sentences; a sentence is cut only
when it alone is longer than a chunk (then at whitespace, and a single over-long "word" at
characters). Consecutive chunks share up to `overlap` tokens, in whole sentences (or words inside
an over-long sentence). Chunks are exact slices of the text, so nothing is lost or rewritten.

"Tokens" are counted by a pluggable `TokenCounter`; the default counts regex words (`\\w+`), which
needs no model. To count in a model's tokens pass e.g. `lambda s: len(llm.tokenize(s))`. Sizes are
computed as the sum of the pieces' counts, which is exact for the word counter and close for
subword tokenizers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from faithrag.errors import ConfigError
from faithrag.retrieval.loaders import Document
from faithrag.types import Passage

TokenCounter = Callable[[str], int]

_WORD = re.compile(r"\w+")
_BLOCK_BREAK = re.compile(r"\n[ \t]*\n")  # a blank line
_HEADING_LINE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t][^\n]*$", re.MULTILINE)
# End punctuation, optional closing quotes/brackets, then whitespace.
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s)")
_ABBREVIATIONS = frozenset([
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "no", "fig",
    "al", "inc", "ltd", "co", "corp", "gen", "col", "lt", "sgt", "jan", "feb", "mar", "apr", "jun",
    "jul", "aug", "sep", "sept", "oct", "nov", "dec", "approx", "dept", "est", "u.s", "u.k"])


def count_words(text: str) -> int:
    """The default token counter: number of regex words."""
    return len(_WORD.findall(text))


@dataclass(frozen=True)
class Chunk:
    text: str
    start: int  # character offsets into the source text: text == source[start:end]
    end: int
    tokens: int


@dataclass(frozen=True)
class ChunkSettings:
    """Chunking parameters, recorded in the index manifest."""

    max_tokens: int = 250
    overlap: int = 50
    counter: str = "words"  # name of the token counter, for the record

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, whitespace trimmed. A blank line ends a sentence and a
    markdown heading line is a sentence of its own; a period after a known abbreviation or a
    single initial does not end one, nor does one followed by a lowercase letter."""
    spans = []
    for p_start, p_end in _blocks(text):
        start = p_start
        for match in _SENTENCE_END.finditer(text, p_start, p_end):
            if _is_sentence_end(text, match.start(), match.end(), p_end):
                spans.append((start, match.end()))
                start = match.end()
        spans.append((start, p_end))
    return [s for s in (_trim(text, a, b) for a, b in spans) if s[0] < s[1]]


def chunk_text(text: str, max_tokens: int = 250, overlap: int = 50,
               count_tokens: TokenCounter = count_words) -> list[Chunk]:
    """Split `text` into chunks of at most `max_tokens` tokens overlapping by at most `overlap`."""
    if max_tokens < 1 or overlap < 0 or overlap >= max_tokens:
        raise ConfigError(f"Bad chunking parameters: max_tokens={max_tokens}, overlap={overlap}",
                          "Use max_tokens >= 1 and 0 <= overlap < max_tokens.")
    units: list[tuple[int, int, int]] = []  # (start, end, tokens)
    for start, end in sentence_spans(text):
        n = count_tokens(text[start:end])
        if n <= max_tokens:
            units.append((start, end, n))
            continue
        for match in re.finditer(r"\S+", text[start:end]):
            units.extend(_fit_word(text, start + match.start(), start + match.end(),
                                   max_tokens, count_tokens))
    chunks = []
    i = 0
    while i < len(units):
        j, total = i, 0
        while j < len(units) and (j == i or total + units[j][2] <= max_tokens):
            total += units[j][2]
            j += 1
        start, end = units[i][0], units[j - 1][1]
        chunks.append(Chunk(text[start:end], start, end, total))
        if j == len(units):
            break
        # step back over the trailing units that fit in the overlap and still leave room for
        # the next unit (else the next chunk would be only the overlap, inside this one)
        k, shared = j, 0
        while (k - 1 > i and shared + units[k - 1][2] <= overlap
               and shared + units[k - 1][2] + units[j][2] <= max_tokens):
            shared += units[k - 1][2]
            k -= 1
        i = k
    return chunks


def chunk_documents(documents: Iterable[Document], max_tokens: int = 250, overlap: int = 50,
                    count_tokens: TokenCounter = count_words) -> list[Passage]:
    """Chunk each document into Passages with ids `<doc id>#<chunk number>` (from 0)."""
    passages = []
    for doc in documents:
        for n, chunk in enumerate(chunk_text(doc.text, max_tokens, overlap, count_tokens)):
            meta = {**doc.meta, "doc_id": doc.id, "chunk": n,
                    "char_start": chunk.start, "char_end": chunk.end}
            passages.append(Passage(f"{doc.id}#{n}", chunk.text, doc.title, doc.source, None, meta))
    return passages


def _blocks(text: str) -> list[tuple[int, int]]:
    """Spans between blank lines, with every markdown heading line split off as its own span."""
    blocks, pos = [], 0
    for match in _HEADING_LINE.finditer(text):
        blocks += _between_blank_lines(text, pos, match.start())
        blocks.append((match.start(), match.end()))
        pos = match.end()
    return blocks + _between_blank_lines(text, pos, len(text))


def _between_blank_lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    parts, pos = [], start
    for match in _BLOCK_BREAK.finditer(text, start, end):
        parts.append((pos, match.start()))
        pos = match.end()
    parts.append((pos, end))
    return parts


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _is_sentence_end(text: str, punct_start: int, punct_end: int, limit: int) -> bool:
    nxt = punct_end
    while nxt < limit and text[nxt].isspace():
        nxt += 1
    if nxt < limit and text[nxt].islower():
        return False
    if text[punct_start] != ".":
        return True
    word_start = punct_start
    while word_start > 0 and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start:punct_start].lstrip("\"'(\u201c\u2018[").lower()
    is_initial = len(word) == 1 and word.isalpha()
    return not (is_initial or word in _ABBREVIATIONS)


def _fit_word(text: str, start: int, end: int, max_tokens: int,
              count_tokens: TokenCounter) -> list[tuple[int, int, int]]:
    """One whitespace-free piece as units of at most max_tokens, halving it at characters."""
    n = count_tokens(text[start:end])
    if n <= max_tokens or end - start == 1:
        return [(start, end, n)]
    mid = (start + end) // 2
    return (_fit_word(text, start, mid, max_tokens, count_tokens)
            + _fit_word(text, mid, end, max_tokens, count_tokens))

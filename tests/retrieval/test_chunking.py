from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithrag.errors import ConfigError
from faithrag.retrieval.chunking import (
    chunk_documents,
    chunk_text,
    count_words,
    sentence_spans,
)
from faithrag.retrieval.loaders import Document

word = st.text(alphabet="abcdefghij", min_size=1, max_size=8)
sentence = st.builds(lambda ws, end: " ".join(ws) + end,
                     st.lists(word, min_size=1, max_size=30), st.sampled_from([".", "!", "?"]))
separator = st.sampled_from([" ", "  ", "\n", "\n\n", " \n\t"])
document = st.builds(lambda ss, sep: sep.join(s[0].upper() + s[1:] for s in ss),
                     st.lists(sentence, min_size=0, max_size=40), separator)
sizes = st.tuples(st.integers(5, 60), st.integers(0, 59)).filter(lambda t: t[1] < t[0])


@settings(max_examples=200, deadline=None)
@given(document, sizes)
def test_chunks_are_exact_slices_within_size_and_lose_nothing(text, size):
    max_tokens, overlap = size
    chunks = chunk_text(text, max_tokens, overlap)
    covered = [False] * len(text)
    for chunk in chunks:
        assert chunk.text == text[chunk.start:chunk.end]
        assert count_words(chunk.text) <= max_tokens
        assert chunk.tokens == count_words(chunk.text)
        for i in range(chunk.start, chunk.end):
            covered[i] = True
    assert all(covered[i] for i, c in enumerate(text) if not c.isspace())
    starts = [c.start for c in chunks]
    assert starts == sorted(set(starts))  # always moves forward


@settings(max_examples=200, deadline=None)
@given(document, sizes)
def test_consecutive_chunks_touch_and_share_at_most_overlap_tokens(text, size):
    max_tokens, overlap = size
    chunks = chunk_text(text, max_tokens, overlap)
    for prev, nxt in pairwise(chunks):
        gap = text[prev.end:nxt.start] if nxt.start >= prev.end else ""
        assert not gap.strip()  # nothing between them
        if nxt.start < prev.end:
            assert count_words(text[nxt.start:prev.end]) <= overlap


@settings(max_examples=200, deadline=None)
@given(st.lists(sentence, min_size=2, max_size=40), st.integers(1, 8))
def test_short_sentences_are_never_cut_and_chunks_overlap(sentences, overlap):
    text = " ".join(s[0].upper() + s[1:] for s in sentences)
    spans = sentence_spans(text)
    longest = max(count_words(text[a:b]) for a, b in spans)
    max_tokens = max(longest, overlap) * 2 + 1  # room for at least two whole sentences
    chunks = chunk_text(text, max_tokens, overlap)
    starts, ends = {a for a, _ in spans}, {b for _, b in spans}
    for chunk in chunks:
        assert chunk.start in starts and chunk.end in ends
    short_enough = all(count_words(text[a:b]) <= overlap for a, b in spans)
    if short_enough:
        for prev, nxt in pairwise(chunks):
            assert nxt.start < prev.end


def test_long_sentence_is_cut_at_whitespace_only_when_needed():
    long_sentence = " ".join(f"w{i}" for i in range(100)) + "."
    text = f"Short start. {long_sentence} Short end."
    chunks = chunk_text(text, max_tokens=30, overlap=5)
    assert len(chunks) > 3
    assert chunks[0].text.startswith("Short start. w0 w1")
    assert chunks[-1].text.endswith("Short end.")
    for prev, nxt in pairwise(chunks):
        assert 0 < count_words(text[nxt.start:prev.end]) <= 5


def test_sentence_splitter_handles_abbreviations_initials_and_headings():
    text = ("# Heading\nDr. Smith met J. K. Rowling in the U.S. capital. She said \"Hi.\" "
            "It was e.g. fine! Was it?\n\nNew paragraph")
    got = [text[a:b] for a, b in sentence_spans(text)]
    assert got == ["# Heading", "Dr. Smith met J. K. Rowling in the U.S. capital.",
                   "She said \"Hi.\"", "It was e.g. fine!", "Was it?", "New paragraph"]


def test_pluggable_counter_changes_sizes():
    text = " ".join(["Alpha beta gamma."] * 20)
    by_chars = chunk_text(text, max_tokens=60, overlap=0, count_tokens=len)
    assert all(len(c.text) <= 60 for c in by_chars)
    assert len(by_chars) > len(chunk_text(text, max_tokens=60, overlap=0))


def test_bad_parameters_raise_config_error():
    with pytest.raises(ConfigError):
        chunk_text("x", max_tokens=10, overlap=10)


def test_chunk_documents_gives_stable_ids_and_provenance():
    doc = Document("docs/a.md", " ".join(["One two three four."] * 10), "A", "src", {"path": "p"})
    passages = chunk_documents([doc], max_tokens=12, overlap=4)
    assert [p.id for p in passages] == [f"docs/a.md#{i}" for i in range(len(passages))]
    assert len(passages) > 1
    first = passages[0]
    assert (first.title, first.source) == ("A", "src")
    assert first.meta["doc_id"] == "docs/a.md" and first.meta["path"] == "p"
    assert doc.text[first.meta["char_start"]:first.meta["char_end"]] == first.text
    assert chunk_documents([doc], max_tokens=12, overlap=4) == passages


def count_visible_chars(text: str) -> int:
    return sum(not c.isspace() for c in text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="xyz.", min_size=1, max_size=40), min_size=1, max_size=10),
       st.integers(3, 12))
def test_words_longer_than_a_chunk_are_cut_at_characters(words, max_tokens):
    text = " ".join(words)
    chunks = chunk_text(text, max_tokens, 1, count_tokens=count_visible_chars)
    assert all(count_visible_chars(c.text) <= max_tokens for c in chunks)
    covered = {i for c in chunks for i in range(c.start, c.end)}
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_no_chunk_is_only_the_overlap_of_the_one_before():
    chunks = chunk_text("Alpha beta. Gamma delta. Epsilon zeta eta theta iota.", 5, 2)
    assert all(b.end > a.end for a, b in pairwise(chunks))
    assert [c.text for c in chunks] == ["Alpha beta. Gamma delta.", "Epsilon zeta eta theta iota."]

"""Token sets for CSRAG's bias: the token ids of a text, minus stopwords and punctuation.

Sets are built from the model's own tokenizer (`llm.tokenize`), so every backend speaking the
same vocabulary gets the same ids, whichever transport carries the bias afterwards.

Word-initial variants: a BPE vocabulary spells a word differently at the start of a text or after
a quote ("Sydney") than after a space (" Sydney"). In running text nearly every word carries the
leading space, but CSRAG's JSON answer starts right after a quote (`"Answer": "Sydney"`), so the
space-less spelling is what the model emits for the answer's first word. Each word therefore adds
the ids of both spellings, `tokenize(word)` and `tokenize(" " + word)`.

Case variants: by default none are added, and the bias follows the evidence's own spelling. With
`case_variants`, each word also adds its lower-cased and capitalised spellings. This is for
answers that are scored as given rather than generated: the cofaithfulqa two-way options are
shown lower-cased, so "january 2012" would otherwise miss the boost that the passage's
"January 2012" earns, while its digits keep theirs. Stopwords are filtered as whole words,
punctuation as tokens; subword ids are kept as they are.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

from faithrag.answers import stopwords
from faithrag.llm.base import LLM, TokenBias

_WORD = re.compile(r"[^\s]+")
_STRIP = string.punctuation + "\u2018\u2019\u201c\u201d\u2013\u2014\u2026"


def _is_punctuation(text: str) -> bool:
    return not text.strip().strip(_STRIP).strip()


def _words(text: str) -> list[str]:
    """Words with surrounding punctuation removed ("Sydney," -> "Sydney"), in order, unique."""
    seen: dict[str, None] = {}
    for raw in _WORD.findall(text):
        word = raw.strip(_STRIP)
        if word:
            seen.setdefault(word, None)
    return list(seen)


def _spellings(word: str, case_variants: bool) -> list[str]:
    if not case_variants:
        return [word]
    return list(dict.fromkeys([word, word.lower(), word[:1].upper() + word[1:].lower()]))


def content_token_ids(llm: LLM, text: str, filter_stopwords: bool = True,
                      case_variants: bool = False) -> set[int]:
    """Ids of `text`'s tokens, both word-initial spellings, minus stopwords and punctuation.

    Stopwords are removed as words (a word's subword pieces are kept as they are, even one that
    reads like a stopword, e.g. "S" of "S|yd|ney"); punctuation is removed as tokens.
    With `filter_stopwords=False` (the ablation) every token of the text is kept, punctuation and
    stopwords included. With `case_variants`, each word also adds its lower-cased and
    capitalised spellings (module docstring)."""
    ids: set[int] = set()
    for word in _words(text):
        if filter_stopwords and word.lower() in stopwords():
            continue
        for spelling in _spellings(word, case_variants):
            ids.update(llm.tokenize(spelling))
            ids.update(llm.tokenize(" " + spelling))
    if not filter_stopwords:
        return ids | set(llm.tokenize(text))
    return {i for i in ids if not _is_punctuation(llm.detokenize([i]))}


def csrag_bias(parametric: set[int], context: set[int], alpha: float, beta: float) -> TokenBias:
    """`alpha·[i ∈ T_p] + beta·[i ∈ T_c]`; an id in both sets gets alpha + beta."""
    return TokenBias.from_sets([(alpha, parametric), (beta, context)])


def decode_ids(llm: LLM, ids: Iterable[int], limit: int = 60) -> list[str]:
    """Readable tokens of a set (for --explain), in id order, at most `limit`."""
    return [llm.detokenize([i]) for i in sorted(ids)[:limit]]

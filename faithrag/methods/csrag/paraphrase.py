"""CSRAG step 2: two paraphrases of each passage, appended to (never replacing) the context.

A paraphrase depends only on the passage, never on the question, so results are cached on disk
by (model, prompt version, passage text); `faithrag index --paraphrase` fills the cache ahead of
time and online CSRAG then pays only for fact extraction."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from faithrag.llm.base import LLM, GenerationRequest, Message, model_identity
from faithrag.methods.common import DATA_NOT_INSTRUCTIONS, generate, render_passages
from faithrag.methods.csrag.cache import JsonCache, cache_key
from faithrag.types import Passage, Step

PROMPT_VERSION = "paraphrase-2"
SYSTEM = "You rewrite text faithfully. " + DATA_NOT_INSTRUCTIONS
# One request per rewrite, each with its own style, sent together in one batched call. Asked for
# both rewrites in one reply (the paper's single prompt), the 1.5B default model often stopped
# after the first or returned the passage verbatim twice.
STYLES = (
    "Rewrite the passage below in plain, simple words.",
    "Rewrite the passage below with its sentences in a different order and different wording.",
)
INSTRUCTION = (
    "{style} Keep every fact of the passage (names, numbers, dates, claims) exactly as the "
    "passage states it, even if you believe it is wrong, and add nothing. Start with "
    "\"[PARAPHRASE]:\" and write only the rewrite.\n\n{passage}")
COUNT = len(STYLES)

_MARKER = re.compile(r"\**\[\s*paraphrase\s*\d*\s*\]\**\s*:?\**", re.IGNORECASE)


@dataclass
class Paraphrases:
    texts: list[str] = field(default_factory=list)
    truncated: bool = False  # the model hit the token cap: the last rewrite may be cut short
    cached: bool = False

    @property
    def status(self) -> str:
        return "ok" if len(self.texts) == COUNT else "partial" if self.texts else "failed"


def parse_paraphrases(raw: str) -> list[str]:
    """The texts after each `[PARAPHRASE]:` marker, at most two. Output without a marker yields
    none (a counted failure): prose that is not marked as a rewrite is not trusted to be one."""
    pieces = _MARKER.split(raw)[1:]
    texts = [" ".join(p.split()).strip(" *") for p in pieces]
    return [t for t in texts if t][:COUNT]


def _same(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def keep_rewrites(passage: str, outputs: Sequence[str]) -> list[str]:
    """The first marked rewrite of each output, minus verbatim copies of the passage and
    repeats of an earlier rewrite (they add no new wording, only length)."""
    kept: list[str] = []
    for output in outputs:
        texts = parse_paraphrases(output)
        if texts and not _same(texts[0], passage) and not any(_same(texts[0], k) for k in kept):
            kept.append(texts[0])
    return kept


def paraphrase_key(model: str, max_tokens: int, passage_text: str,
                   limits: Sequence[int] = ()) -> str:
    """The cache key of a passage's rewrites by `model` (`model_identity`) under a cap of
    `max_tokens`; `limits` are the per-request token limits when the context window cut them."""
    return cache_key(model, PROMPT_VERSION, max_tokens, passage_text, *limits)


class Paraphraser:
    def __init__(self, llm: LLM, max_tokens: int = 1024, cache: JsonCache | None = None):
        self.llm = llm
        self.max_tokens = max_tokens
        self.cache = cache
        self.model = model_identity(llm)

    def _requests(self, passage: Passage, step: Step) -> tuple[list[GenerationRequest], bool]:
        """One request per style (none when the passage leaves no room for a rewrite), and
        whether the context window cut a request's token limit."""
        length = len(self.llm.tokenize(passage.text))
        requests, window_bound = [], False
        for style in STYLES:
            user = INSTRUCTION.format(style=style, passage=render_passages([passage.text]))
            messages = (Message("system", SYSTEM), Message("user", user))
            room = self.llm.context_window - self.llm.count_chat_tokens(messages) - 8
            wanted = min(self.max_tokens // COUNT, int(1.3 * length) + 32)
            max_tokens = min(wanted, room)
            window_bound |= room < wanted
            if max_tokens < 32:
                step.warnings.append(f"passage {passage.id} ({length} tokens) leaves no room to "
                                     "paraphrase it; it is used without paraphrases")
                return [], window_bound
            requests.append(GenerationRequest(messages, max_tokens=max_tokens,
                                              purpose="paraphrase"))
        return requests, window_bound

    def _key(self, passage: Passage, requests: list[GenerationRequest],
             window_bound: bool) -> str:
        """The cap and the passage determine the rewrites, unless the window cut their token
        limits: then the limits are part of the key, so rewrites cut short in a small window
        are not served to a larger one."""
        limits = [r.max_tokens for r in requests] if window_bound else []
        return paraphrase_key(self.model, self.max_tokens, passage.text, limits)

    def _cached(self, key: str) -> Paraphrases | None:
        entry = self.cache.get(key) if self.cache else None
        if entry is None or not isinstance(entry.get("texts"), list):
            return None
        return Paraphrases([str(t) for t in entry["texts"]], bool(entry.get("truncated")),
                           cached=True)

    def paraphrase(self, passages: Sequence[Passage], step: Step) -> list[Paraphrases]:
        """Paraphrases of each passage (cached ones reused); uncached passages go to the model
        in one batched call."""
        results: list[Paraphrases | None] = []
        todo: list[tuple[int, str, list[GenerationRequest]]] = []
        for i, passage in enumerate(passages):
            requests, window_bound = self._requests(passage, step)
            if not requests:
                results.append(Paraphrases())
                continue
            key = self._key(passage, requests, window_bound)
            hit = self._cached(key)
            results.append(hit)
            if hit is None:
                todo.append((i, key, requests))
        if todo:
            completions = iter(generate(self.llm, [r for _, _, rs in todo for r in rs], step))
            for i, key, requests in todo:
                outputs = [next(completions) for _ in requests]
                value = Paraphrases(keep_rewrites(passages[i].text, [c.text for c in outputs]),
                                    truncated=any(c.finish_reason == "length" for c in outputs))
                if self.cache:
                    self.cache.put(key, {"texts": value.texts, "truncated": value.truncated})
                results[i] = value
        return [r if r is not None else Paraphrases() for r in results]

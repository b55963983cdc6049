"""Chat-template encoding that keeps retrieved text from posing as control tokens.

The template is rendered once with placeholders to find where each message's content goes.
Control tokens (`<|im_start|>`, ...) are recognised only in the template's own text; message
contents and the assistant-turn suffix are tokenized as plain text, so a passage containing
"<|im_end|>" cannot close its turn. A template that drops, repeats or rewrites contents (beyond
trimming) falls back to tokenizing the rendered prompt as a whole, as llama.cpp would.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from faithrag.llm.base import ChoiceRequest, Message

_MARK = "\ue000{}\ue001"  # private-use placeholder for message contents while locating them

Render = Callable[[Sequence[Message], Sequence[str]], str]  # (messages, contents) -> prompt
Tokenize = Callable[[str], list[int]]


class ChatEncoder:
    def __init__(self, render: Render, control: Mapping[str, int], tokenize_plain: Tokenize,
                 tokenize_special: Tokenize):
        self._render = render
        self._control = dict(control)
        self._pattern = re.compile(
            "(" + "|".join(re.escape(t) for t in sorted(control, key=len, reverse=True)) + ")"
        ) if control else None
        self._plain = tokenize_plain
        self._special = tokenize_special

    def encode(self, messages: Sequence[Message], suffix: str = "") -> list[int]:
        """Token ids of the template applied to `messages`, followed by `suffix` (text of the
        assistant turn so far)."""
        contents = [m.content for m in messages]
        real = self._render(messages, contents)
        marks = [_MARK.format(i) for i in range(len(messages))]
        pieces = re.split("(" + "|".join(re.escape(m) for m in marks) + ")",
                          self._render(messages, marks)) if marks else [real]
        template_parts = pieces[0::2]
        if pieces[1::2] != marks:
            return self._special(real + suffix)
        for candidate in (contents, [c.strip() for c in contents]):
            if "".join(p + c for p, c in zip(template_parts, candidate)) + template_parts[-1] == real:
                break
        else:
            return self._special(real + suffix)

        segments: list[str | int] = [""]  # plain text, or a control token id
        for i, part in enumerate(template_parts):
            chunks = self._pattern.split(part) if self._pattern else [part]
            for j, chunk in enumerate(chunks):
                if j % 2:
                    segments += [self._control[chunk], ""]
                else:
                    segments[-1] += chunk
            if i < len(candidate):
                segments[-1] += candidate[i]
        segments[-1] += suffix
        ids: list[int] = []
        for segment in segments:
            if isinstance(segment, int):
                ids.append(segment)
            elif segment:
                ids.extend(self._plain(segment))
        return ids


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class ChoiceTokens:
    """How a choice-scoring request splits into tokens: `fulls[i]` is the prompt followed by
    choice i, whose own tokens are `fulls[i][owns[i]:]`; the first `shared` tokens are common
    to every choice and need evaluating once."""

    base: list[int]
    fulls: list[list[int]]
    owns: list[int]
    shared: int


def split_choices(encode: Callable[[Sequence[Message], str], list[int]],
                  request: ChoiceRequest) -> ChoiceTokens:
    """Each choice is tokenized together with the prompt, so a boundary merge (the prefix's
    trailing space joining the choice's first word) is scored as the model would see it."""
    base = encode(request.messages, request.answer_prefix)
    fulls = [encode(request.messages, request.answer_prefix + c) for c in request.choices]
    owns = [common_prefix(base, full) for full in fulls]
    shared = min(owns, default=len(base))
    if shared == 0:
        raise ValueError("score_choices needs a non-empty prompt before the choices")
    return ChoiceTokens(base, fulls, owns, shared)

"""Reading a {"Reason": ..., "Answer": ...} reply (the CSRAG paper's answer format).

Small models wrap JSON in code fences, use single quotes, add prose around it or stop early.
The reader tolerates all of that, but the Answer must name exactly one option (compared after
case, whitespace and edge-punctuation normalisation); anything else is a parse failure that the
caller counts — never mapped to an option by guesswork."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)
# a key where JSON or "key: value" lines put one: quoted after "{", "," or a line start, or bare
# at a line start (so "... the old answer: 'X'" inside a reply cut mid-Reason is no field)
_FIELD = re.compile(
    r"""(?:(?:^|[{,])\s*(?P<quote>["'])(?P<quoted>reason|answer)(?P=quote)"""
    r"""|^[ \t]*(?P<bare>reason|answer))\s*:\s*"""
    r"""(?:"(?P<double>(?:[^"\\]|\\.)*)"|'(?P<single>(?:[^'\\]|\\.)*)')""",
    re.IGNORECASE | re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class JsonAnswer:
    answer: str | None  # the Answer field as written, None when absent
    reason: str
    choice_index: int | None  # set only when the Answer names exactly one option


def _fields_from_json(text: str) -> dict[str, str] | None:
    for match in _OBJECT.finditer(text):
        try:
            obj = json.loads(match.group(0))
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(obj, dict):
            lowered = {str(k).strip().lower(): v for k, v in obj.items()}
            if "answer" in lowered:
                return {k: v if isinstance(v, str) else json.dumps(v) for k, v in lowered.items()}
    return None


def _fields_by_pattern(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for m in _FIELD.finditer(text):
        value = m["double"] if m["double"] is not None else m["single"]
        key = (m["quoted"] or m["bare"]).lower()
        fields.setdefault(key, value.replace('\\"', '"').replace("\\'", "'"))
    return fields


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().strip(".,;:!?\"'`*").strip().lower()


def parse_json_answer(text: str, choices: Sequence[str]) -> JsonAnswer:
    fields = _fields_from_json(text) or _fields_by_pattern(text)
    answer = fields.get("answer")
    reason = fields.get("reason", "")
    if answer is None:
        return JsonAnswer(None, reason, None)
    target = _norm(answer)
    hits = [i for i, c in enumerate(choices) if _norm(c) == target]
    return JsonAnswer(answer, reason, hits[0] if len(hits) == 1 else None)


_REASON_KEY = re.compile(r"""["']?reason["']?\s*:\s*(["'])""", re.IGNORECASE)
# a reply stopped right after the key: only a code fence, "{" and the key before it
_REASON_KEY_ALONE = re.compile(r"""\s*(?:```\w*\s*)?\{?\s*["']?reason["']?\s*:\s*""",
                               re.IGNORECASE)


def read_reason(text: str) -> tuple[str, str]:
    """The "Reason" of a reply that was stopped before its "Answer" key, and how it was read:
    "complete" (its closing quote seen), "truncated" (the reply ended inside it, or right after
    its key: the reason is then empty) or "unlabelled" (no Reason key: the whole reply, trimmed
    of braces and quotes, is the reason)."""
    if _REASON_KEY_ALONE.fullmatch(text):
        return "", "truncated"
    opened = _REASON_KEY.search(text)
    if not opened:
        return text.strip().strip("`{}\"' \n,"), "unlabelled"
    quote, body = opened.group(1), text[opened.end():]
    tail = re.sub(r"[\s,}]+$", "", body)
    # the closing quote is the last one (unescaped quotes inside the reason are kept), and it
    # is not escaped: an even number of backslashes before it
    inner = tail[:-1]
    if tail.endswith(quote) and (len(inner) - len(inner.rstrip("\\"))) % 2 == 0:
        return _unescape(inner, quote), "complete"
    return _unescape(body.rstrip(), quote).rstrip(), "truncated"


def _unescape(inner: str, quote: str) -> str:
    if quote == '"':
        try:
            value = json.JSONDecoder(strict=False).decode(f'"{inner}"')
            if isinstance(value, str):
                return value
        except json.JSONDecodeError:
            pass
    return inner.replace("\\" + quote, quote)

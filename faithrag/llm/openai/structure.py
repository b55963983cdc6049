"""Structured output over OpenAI-compatible servers: the forms a request's structure is sent in,
and the fallback when a server refuses them.

A request's `schema` is sent as OpenAI's `response_format` {"type": "json_schema",
"json_schema": {"name", "schema", "strict"}} (OpenAI, vLLM, llama.cpp's llama-server); a server
that refuses that form gets the schema compiled to GBNF here (when llama-cpp-python is
installed) as `grammar` (llama-cpp-python's server), then llama-cpp-python's {"type":
"json_object", "schema": ...}. That last form is skipped for a schema with an `enum` or `const`
string holding a quote or backslash: llama-cpp-python's server compiles such a schema to a
grammar it cannot parse, and aborts. A `grammar` (GBNF) is sent as `grammar` (llama.cpp's
servers) and `guided_grammar` (vLLM). The first form a server takes is used from then on; when
it refuses every form (an error answer to the structured request that the same request without
structure does not get), the request is sent unconstrained, and so are all later ones of that
kind, with one warning (in that completion's warnings and the log); a schema that no form left
can carry goes unconstrained, with one warning naming what would carry it. A reply to a schema
that does not parse as JSON (`may_be_schema_reply`) is for the caller to flag once.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from faithrag.errors import ServerRejectedError
from faithrag.llm.base import GenerationRequest
from faithrag.llm.grammar import gbnf_for

# the ways of sending a request's structure, in the order tried: name -> the request fields
STRUCTURE_FORMS: dict[str, tuple[str, ...]] = {
    "schema": ("json_schema", "grammar", "json_object_schema"),
    "grammar": ("grammar",),
}
_log = logging.getLogger(__name__)


class StructureForms:
    """The structure forms one server refused, and the warnings about structure given once.
    `where` names the server in the log."""

    def __init__(self, where: str):
        self.refused: set[str] = set()
        self._where = where
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def send(self, post: Callable[[str, dict[str, Any]], Any], payload: dict[str, Any],
             request: GenerationRequest, warnings: list[str],
             constrained_cap: Callable[[], int]) -> tuple[Any, bool]:
        """The chat completion `payload` posted with `request`'s structure in the first form
        the server takes (see the module docstring) and `constrained_cap()` as its max_tokens,
        and whether it went constrained; else posted as it is."""
        kind = "schema" if request.schema is not None else "grammar"
        refused: list[tuple[str, ServerRejectedError]] = []
        constrained = None  # the payload with a constrained reply's token cap, once needed
        for form in STRUCTURE_FORMS[kind]:
            if form in self.refused:
                continue
            fields = structure_fields(form, request)
            if fields is None:  # this form cannot carry this request's structure
                continue
            if constrained is None:
                constrained = {**payload, "max_tokens": constrained_cap()}
            try:
                data = post("/chat/completions", {**constrained, **fields})
            except ServerRejectedError as exc:
                refused.append((form, exc))
                continue
            self.refused.update(f for f, _ in refused)  # a later form was taken
            return data, True
        data = post("/chat/completions", payload)  # fails alone: not the structure's fault
        self.refused.update(form for form, _ in refused)
        if set(STRUCTURE_FORMS[kind]) <= self.refused:
            reason = f" ({refused[-1][1].message})" if refused else ""
            self.say_once(kind, warnings, f"the server refused the request's {kind}{reason}; "
                          f"{kind} requests go unconstrained from now on")
        else:  # forms are left, but none could carry this schema
            self.say_once("uncarried", warnings, "a schema went unconstrained: the server "
                          "refused response_format json_schema, and the forms left cannot carry "
                          "it (a grammar needs llama-cpp-python here: pip install "
                          "'faithrag[llamacpp]'; llama-cpp-python's json_object form cannot "
                          "hold enum or const strings with quotes or backslashes)")
        return data, False

    def say_once(self, topic: str, warnings: list[str], message: str) -> None:
        """`message` into `warnings` and the log, the first time `topic` comes up only."""
        with self._lock:
            if topic in self._said:
                return
            self._said.add(topic)
        warnings.append(message)
        _log.warning("%s: %s", self._where, message)


def structure_fields(form: str, request: GenerationRequest) -> dict[str, Any] | None:
    """The request fields that carry `request`'s structure in `form` (see STRUCTURE_FORMS), or
    None when that form cannot carry it: a schema as `grammar` without llama-cpp-python here to
    compile it, or as llama-cpp-python's json_object when its converter would miswrite it."""
    schema = dict(request.schema or {})
    if form == "json_schema":
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": re.sub(r"[^A-Za-z0-9_-]", "_", request.purpose) or "reply", "schema": schema,
            "strict": True}}}
    if form == "json_object_schema":
        if _has_constant_with_quote_or_backslash(schema):
            return None
        return {"response_format": {"type": "json_object", "schema": schema}}
    if request.grammar is not None:
        return {"grammar": request.grammar, "guided_grammar": request.grammar}
    grammar = schema_gbnf(json.dumps(schema))  # key order kept: it orders the properties
    return None if grammar is None else {"grammar": grammar}


@functools.lru_cache(maxsize=256)
def schema_gbnf(schema_json: str) -> str | None:
    """The GBNF of a JSON schema (as `gbnf_for` on the embedded backend), or None when
    llama-cpp-python, whose converter it uses, is not installed."""
    try:
        return gbnf_for(json.loads(schema_json), None)
    except ImportError:
        return None


def _has_constant_with_quote_or_backslash(value: Any) -> bool:
    """Whether a schema holds an `enum` or `const` string with a quote or backslash (which
    llama-cpp-python's converter writes into GBNF literals unescaped)."""
    if isinstance(value, dict):
        constants = list(value.get("enum") or []) + ([value["const"]] if "const" in value else [])
        return (any(isinstance(c, str) and ('"' in c or "\\" in c) for c in constants)
                or any(_has_constant_with_quote_or_backslash(v) for v in value.values()))
    if isinstance(value, list):
        return any(_has_constant_with_quote_or_backslash(v) for v in value)
    return False


def may_be_schema_reply(text: str, finish_reason: str | None, stop: Sequence[str]) -> bool:
    """Whether `text` can be a constrained reply to a JSON schema: JSON, or cut short (by the
    token cap, or by one of the request's `stop` strings, which servers strip and report as
    "stop") after the start of a JSON object or array."""
    if finish_reason == "length" or (stop and text.lstrip()[:1] in ("{", "[")):
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True

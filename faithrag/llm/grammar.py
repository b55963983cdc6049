"""GBNF grammars: string literals (`gbnf_literal`), and grammar-constrained decoding for the
embedded llama.cpp backend.

A request's structure (`GenerationRequest.schema` or `.grammar`, see faithrag/llm/base.py) is
compiled once per distinct text into llama.cpp's own grammar sampler (`llama_sampler_init_grammar`;
a JSON schema goes through llama-cpp-python's converter `json_schema_to_gbnf` first), and each
request decodes with its own copy of it (`llama_sampler_clone`). `GrammarMask` is that copy seen as
a mask over a row of logits:

- `allows(token)`: whether the grammar admits `token` next (one candidate: cheap);
- `mask(scores)`: every token the grammar does not admit set to -inf, in place (the whole
  vocabulary: the expensive case);
- `accept(token)`: advance the grammar past a picked token.

A decoding loop checks its pick with `allows` and masks the row only when the pick is refused:
for greedy decoding that is exactly the argmax of the masked row, and for sampling a refused
draw resampled from the masked row gives exactly the masked distribution (llama.cpp's own
sampler does the same). End-of-generation tokens are admitted only where the grammar is complete.

A schema or grammar llama.cpp cannot compile is a ConfigError, raised before any decoding.
"""

from __future__ import annotations

import ctypes
import json
import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from faithrag.errors import ConfigError

GRAMMAR_HINT = ("Check the schema or grammar the request carries (GenerationRequest.schema / "
                ".grammar), or turn constrained decoding off with llm.constrain = false.")


def gbnf_literal(text: str) -> str:
    """`text` as a GBNF string literal (other control characters as \\xHH escapes)."""
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
    return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", escaped) + '"'


def gbnf_for(schema: Mapping[str, Any] | None, grammar: str | None) -> str | None:
    """The GBNF text of a request's structure: `grammar` as given, `schema` converted by
    llama-cpp-python's JSON-schema converter; None for neither.

    The converter writes an `enum` or `const` string as its JSON text inside a GBNF literal
    without escaping the backslashes JSON puts before quotes, so an option such as
    '"The Merger"' gave a grammar llama.cpp cannot parse; here such values become literals
    escaped as GBNF needs (`gbnf_literal`), non-ASCII characters kept as they are written."""
    if grammar is not None:
        return grammar
    if schema is None:
        return None
    from llama_cpp.llama_grammar import SchemaConverter

    class Converter(SchemaConverter):
        def _generate_constant_rule(self, value: Any) -> str:
            return gbnf_literal(json.dumps(value, ensure_ascii=False))

    try:  # as llama_cpp.llama_grammar.json_schema_to_gbnf, with the converter above
        converter = Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        converter.visit(converter.resolve_refs(json.loads(json.dumps(schema)), "stdin"), "")
        return converter.format_grammar()
    except Exception as exc:  # the converter asserts and raises bare exceptions
        raise ConfigError(f"llama.cpp cannot compile the JSON schema {_short(schema)}: {exc}",
                          GRAMMAR_HINT) from exc


def _short(schema: Mapping[str, Any]) -> str:
    text = json.dumps(schema)
    return text if len(text) <= 160 else text[:157] + "..."


class CompiledGrammars:
    """Grammar samplers compiled from GBNF texts, the most recent `capacity` kept; `mask(text)`
    gives a fresh GrammarMask (a clone of the compiled one)."""

    def __init__(self, lib, vocab, capacity: int = 32):
        self._lib = lib
        self._vocab = vocab
        self._capacity = capacity
        self._compiled: OrderedDict[str, Any] = OrderedDict()

    def compile(self, gbnf: str) -> Any:
        """The compiled sampler of `gbnf` (kept for reuse); ConfigError when it does not parse."""
        sampler = self._compiled.get(gbnf)
        if sampler is not None:
            self._compiled.move_to_end(gbnf)
            return sampler
        sampler = self._lib.llama_sampler_init_grammar(self._vocab, gbnf.encode("utf-8"), b"root")
        if not sampler:
            first = gbnf.strip().splitlines()[0] if gbnf.strip() else "(empty)"
            raise ConfigError(
                f"llama.cpp could not parse the grammar (first line: {first[:120]!r}); its "
                "parser's message is on stderr.", GRAMMAR_HINT)
        self._compiled[gbnf] = sampler
        while len(self._compiled) > self._capacity:
            self._lib.llama_sampler_free(self._compiled.popitem(last=False)[1])
        return sampler

    def mask(self, gbnf: str) -> GrammarMask:
        return GrammarMask(self._lib, self._lib.llama_sampler_clone(self.compile(gbnf)))

    def close(self) -> None:
        while self._compiled:
            self._lib.llama_sampler_free(self._compiled.popitem()[1])


class GrammarMask:
    """One request's grammar state over a logits row (see the module docstring). Call `close`
    when the request is done."""

    def __init__(self, lib, sampler):
        self._lib = lib
        self._sampler = sampler
        self._one = (lib.llama_token_data * 1)()
        self._one_array = lib.llama_token_data_array(
            data=ctypes.cast(self._one, lib.llama_token_data_p), size=1, selected=-1,
            sorted=False)
        self._rows: np.ndarray | None = None  # (id, logit, p) records of the whole vocabulary

    def allows(self, token: int) -> bool:
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0
        self._one_array.size, self._one_array.selected = 1, -1
        self._lib.llama_sampler_apply(self._sampler, ctypes.byref(self._one_array))
        return bool(np.isfinite(self._one[0].logit))

    def mask(self, scores: np.ndarray) -> None:
        n = scores.shape[0]
        if self._rows is None or self._rows.shape[0] != n:
            self._rows = np.zeros(n, dtype=[("id", np.int32), ("logit", np.float32),
                                             ("p", np.float32)])
            self._rows["id"] = np.arange(n, dtype=np.int32)
        self._rows["logit"] = scores
        array = self._lib.llama_token_data_array(
            data=self._rows.ctypes.data_as(self._lib.llama_token_data_p), size=n, selected=-1,
            sorted=False)
        self._lib.llama_sampler_apply(self._sampler, ctypes.byref(array))
        if array.size != n:  # the grammar sampler masks in place and never reorders
            raise RuntimeError("llama.cpp's grammar sampler resized the candidates")
        scores[~np.isfinite(self._rows["logit"])] = -np.inf

    def accept(self, token: int) -> None:
        self._lib.llama_sampler_accept(self._sampler, token)

    def close(self) -> None:
        if self._sampler:
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = None

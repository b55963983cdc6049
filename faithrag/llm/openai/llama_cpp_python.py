"""llama-cpp-python's server (`python -m llama_cpp.server`, 0.3.36).

POST /extras/tokenize (adds BOS when the model does; it is dropped here) and /extras/detokenize;
`logit_bias` keys are token ids unless `logit_bias_type="tokens"` is sent (never sent here);
log-probs need `logits_all`, on by default in its server; the context window is not exposed
(pass `context_window`, else a local GGUF tokenizer's trained context length is used); no chat
template endpoint (a local GGUF tokenizer renders the GGUF's template exactly as it does).
Log-probs are those before `logit_bias`, so a forced token reports its own; echoed prompt
log-probs are right only when the prompt starts with the BOS token, and are slow (a Python sort
of the vocabulary per prompt token). Every request with log-probs also pays a log-softmax over
the whole prompt's logits, so choice scoring forces an option's tokens with a grammar in one
request. It reads a prompt after the prefix it shares with the previous request, and the
log-probs it reports depend on that history; after a one-token prompt nothing is shared. Its
repeat penalty (1.1 by default) is switched off for plain decoding. Its tokenize endpoint has no
switch for control-token markup: "<|im_end|>" in a text is read as the control token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithrag.llm.openai.flavour import Flavour
from faithrag.llm.openai.transport import Transport


class LlamaCppPython(Flavour):
    name = "llama-cpp-python"
    tokenizes = True
    holds_prompts = True

    def __init__(self, transport: Transport, model: str, bos_prefix: Sequence[int]):
        super().__init__(transport, model)
        self._bos_prefix = list(bos_prefix)  # what /extras/tokenize prepends (the empty text's)

    def plain_decoding(self) -> dict[str, float]:
        return {"repeat_penalty": 1.0}

    def tokenize(self, text: str, special: bool) -> tuple[int, ...]:
        ids = self.transport.request("POST", self.transport.root_url + "/extras/tokenize",
                                     {"model": self.model, "input": text})["tokens"]
        n = len(self._bos_prefix)
        return tuple(int(t) for t in (ids[n:] if ids[:n] == self._bos_prefix else ids))

    def detokenize(self, ids: tuple[int, ...]) -> str:
        return self.transport.request("POST", self.transport.root_url + "/extras/detokenize",
                                      {"model": self.model, "tokens": list(ids)})["text"]

    def empty_cache_reads(self, text: str | None) -> list[dict[str, Any]]:
        return [{"prompt": "\n"}] + ([] if text is None else [{"prompt": text}])

"""Which server flavour a server is, from its tokenize endpoints (probed once per backend)."""

from __future__ import annotations

from faithrag.llm.openai.flavour import Flavour
from faithrag.llm.openai.llama_cpp_python import LlamaCppPython
from faithrag.llm.openai.llama_server import LlamaServer
from faithrag.llm.openai.transport import Transport
from faithrag.llm.openai.vllm import VLLM

# a fixed text the probes send (tokenizers compared, forced-token scoring checked)
PROBE_TEXT = "faithrag tokenizer probe: Paris, 1889 - naive cafe, 42 km/h."


def detect_flavour(transport: Transport, model: str) -> Flavour:
    """The flavour of the server behind `transport`: POST /tokenize (one payload that vLLM and
    llama-server both read) answered with `tokens` is vLLM when the reply has vLLM's `count` or
    `max_model_len`, else llama-server; then POST /extras/tokenize of the empty text answered
    with `tokens` (its BOS prefix) is llama-cpp-python's server; else the OpenAI API's. A server
    that does not answer raises ServerUnreachableError."""
    data = transport.probe("POST", transport.root_url + "/tokenize", {
        "model": model, "prompt": PROBE_TEXT, "add_special_tokens": False,
        "content": PROBE_TEXT, "add_special": False})
    if isinstance(data, dict) and isinstance(data.get("tokens"), list):
        if "count" in data or "max_model_len" in data:
            window = int(data["max_model_len"]) if data.get("max_model_len") else None
            return VLLM(transport, model, window)
        return LlamaServer(transport, model)
    empty = transport.probe("POST", transport.root_url + "/extras/tokenize",
                            {"model": model, "input": ""})
    if isinstance(empty, dict) and isinstance(empty.get("tokens"), list):
        return LlamaCppPython(transport, model, [int(t) for t in empty["tokens"]])
    return Flavour(transport, model)

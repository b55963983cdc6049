"""The LLM protocol over any OpenAI-compatible HTTP server (vLLM, SGLang, llama.cpp's
llama-server, llama-cpp-python's server, OpenAI), with httpx and no SDK: `OpenAICompatLLM`.

Generation is `POST {base_url}/chat/completions`; a TokenBias travels as `logit_bias` (see
`logit_bias_payload` for clamping and the cap). Token ids must come from the tokenizer the server
uses: `tokenizer="server"` asks the server itself, otherwise a local tokenizer (a preset or .gguf
through llama-cpp-python with `vocab_only=True`, or a Hugging Face tokenizer.json; see
faithrag/llm/tokenizers.py) is checked once against the server's tokenize endpoint when it has
one. Choice scoring is exact or refused, never made up. A request sent with its structure asks
for `base.decoding_cap` tokens (up to CHARS_PER_TOKEN x max_tokens, within the context window
after the prompt), as the embedded backend decodes, so that a constrained reply closes its
structure; one sent without keeps max_tokens.

The modules, one concern each:
- transport.py: HTTP, timeouts, retries with back-off, the errors raised.
- flavour.py: what a server offers beyond the OpenAI API, and the OpenAI API's own flavour (also
  SGLang's, unless it offers vLLM's endpoints); one module per other flavour: vllm.py,
  llama_server.py, llama_cpp_python.py; detect.py finds a server's flavour once.
- session.py: one backend's view of its server (flavour, reported window and vocabulary, how
  requests are sent to servers that hold prompts); tokens.py: its tokenizer.
- structure.py: the forms a schema or grammar is sent in, and the fallback when refused.
- bias.py: TokenBias as `logit_bias`.
- scoring.py: option scoring; forced.py: forced-token log-probs and the capability probe;
  normalisers.py: a bias's normaliser bounded from top log-probs.
- replies.py: the wire shapes read and written.
- backend.py: OpenAICompatLLM, which puts them together.
"""

from faithrag.llm.openai.backend import OpenAICompatLLM
from faithrag.llm.openai.bias import LOGIT_BIAS_LIMIT, logit_bias_payload
from faithrag.llm.openai.forced import TOP_LOGPROBS, WIDE_TOP_LOGPROBS
from faithrag.llm.openai.normalisers import (
    PROBABILITY_TOLERANCE,
    log_normaliser_bounds,
    probability_error,
)

__all__ = [
    "LOGIT_BIAS_LIMIT",
    "PROBABILITY_TOLERANCE",
    "TOP_LOGPROBS",
    "WIDE_TOP_LOGPROBS",
    "OpenAICompatLLM",
    "log_normaliser_bounds",
    "logit_bias_payload",
    "probability_error",
]

"""One backend's view of its server: the transport, the server's flavour (found once), what the
server reports of itself (context window, vocabulary size), its tokenizer, and how requests are
sent so that llama.cpp's servers read a prompt as the embedded backend does.

llama.cpp's servers evaluate a prompt after the longest prefix it shares with what they hold
from the previous request (always evaluating at least the prompt's last token), and log-probs
read after such a prefix depend on how the prompt was split into batches, hence on what ran
before (see docs/backends.md). A scoring request (`post_scoring`) therefore first has the
server hold the prompt minus its last token, read from an empty cache, and a `keep_prefix`
generation has its recurring head read on its own first (`kept_prefix_text`).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from faithrag.errors import ServerUnreachableError
from faithrag.llm.base import GenerationRequest, Message
from faithrag.llm.chat_encoding import common_prefix
from faithrag.llm.openai.detect import detect_flavour
from faithrag.llm.openai.flavour import Flavour
from faithrag.llm.openai.tokens import Tokens
from faithrag.llm.openai.transport import Transport
from faithrag.llm.tokenizers import LocalTokenizer


class ServerSession:
    """`transport` to a server serving `model`; `local`: the served model's tokenizer, or None
    to use the server's tokenize endpoint."""

    def __init__(self, transport: Transport, model: str, local: LocalTokenizer | None):
        self.transport = transport
        self.model = model
        self.tokens = Tokens(local, self.flavour)
        self._lock = threading.Lock()
        self._flavour: Flavour | None = None
        self._unknown = Flavour(transport, model)  # until the server has answered the probe
        self._info_probed = False
        self.server_context: int | None = None  # the context window the server reports
        self.server_vocab: int | None = None  # the vocabulary size the server reports
        # a scoring request and those that prepare it (or a kept head and its generation)
        self.fresh_lock = threading.Lock()
        self._primed_prompt: str | None = None  # the server holds this prompt but its last token

    # ----------------------------------------------------------------- what the server is
    def flavour(self, tolerate_dead: bool = False) -> Flavour:
        """The server's flavour, probed once. A server that does not answer raises
        ServerUnreachableError, unless `tolerate_dead`: then the OpenAI API's flavour is
        answered, and the server is asked again next time."""
        if self._flavour is not None:
            return self._flavour
        with self._lock:
            if self._flavour is None:
                try:
                    self._flavour = detect_flavour(self.transport, self.model)
                except ServerUnreachableError:
                    if tolerate_dead:  # the request at hand reports the dead server
                        return self._unknown
                    raise
                self.server_context = self._flavour.context_window
            return self._flavour

    def ensure_info(self) -> None:
        """Context window and vocabulary size as the server reports them (once): /v1/models
        (vLLM's `max_model_len`, llama-server's `meta.n_vocab`), then the flavour's own
        endpoint (llama-server's /props)."""
        if self._info_probed:
            return
        self.tokens.ensure()
        flavour = self.flavour()
        with self._lock:
            if self._info_probed:
                return
            models = self.transport.probe("GET", self.transport.base_url + "/models")
            entries = models.get("data", []) if isinstance(models, dict) else []
            entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == self.model),
                         entries[0] if len(entries) == 1 else None)
            if isinstance(entry, dict):
                if entry.get("max_model_len"):  # vLLM
                    self.server_context = int(entry["max_model_len"])
                meta = entry.get("meta")
                if isinstance(meta, dict) and meta.get("n_vocab"):  # llama-server
                    self.server_vocab = int(meta["n_vocab"])
            own = flavour.read_context_window()
            if own:
                self.server_context = own
            self._info_probed = True

    # ----------------------------------------------------------------- requests
    def post(self, path: str, payload: dict[str, Any]) -> Any:
        """POST to the API; a (chat) completion request carries the flavour's plain-decoding
        fields (see Flavour.plain_decoding), and leaves the server holding another prompt."""
        if path.endswith("completions"):
            payload = {**self.flavour(tolerate_dead=True).plain_decoding(), **payload}
            self._primed_prompt = None  # the server's prompt cache now holds something else
        return self.transport.request("POST", self.transport.base_url + path, payload)

    def forget_held_prompt(self) -> None:
        """Forget what the server holds (another client may have used it since)."""
        self._primed_prompt = None

    def post_scoring(self, payload: dict[str, Any]) -> Any:
        """A /v1/completions request whose log-probs score options. On a server that holds
        prompts, the server is first made to hold the prompt minus its last token, read from an
        empty cache (`read_from_empty`, max_tokens=1), so every scoring request on that prompt
        reads only its last token and the choice's: the split the embedded backend uses, and
        one evaluation of the prompt for all its choices. A prompt that cannot be cut as text
        before its last token is read whole from an empty cache instead. The requests go under
        one lock, and each `score_choices` call prepares the server anew; a request from
        another client during the call can still come between them and move its scores at the
        float level."""
        if not self.flavour(tolerate_dead=True).holds_prompts:
            return self.post("/completions", payload)
        prompt = payload["prompt"]
        with self.fresh_lock:
            primed = self._primed_prompt == prompt
            if not primed:
                head = self.tokens.head_text(prompt, self.tokens.tokenize_prompt(prompt))
                self.read_from_empty(head)
                primed = head is not None
            data = self.post("/completions", payload)
            self._primed_prompt = prompt if primed else None
            return data

    def read_from_empty(self, text: str | None) -> None:
        """Leave a server that holds prompts holding `text` read from an empty cache, or (None)
        holding nothing a prompt can share (Flavour.empty_cache_reads); max_tokens=1, the
        token not read."""
        for read in self.flavour().empty_cache_reads(text):
            self.post("/completions", {"model": self.model, "max_tokens": 1,
                                       "temperature": 0.0, **read})

    def kept_prefix_text(self, request: GenerationRequest) -> str | None:
        """The rendered text of a `keep_prefix` request's recurring head (its leading messages
        and `cache_prefix_text`), which the embedded backend reads on its own before the rest
        of the prompt; None when the request keeps none, the server does not hold prompts, or
        the chat template is unknown."""
        if not request.keep_prefix:
            return None
        if not self.flavour(tolerate_dead=True).holds_prompts:
            return None
        recurring = list(request.messages[:request.cache_prefix])
        if request.cache_prefix_text:
            recurring.append(Message(request.messages[request.cache_prefix].role,
                                     request.cache_prefix_text))
        rendered = self.tokens.render_chat(request.messages)
        head = self.tokens.render_chat(recurring) if recurring else None
        if rendered is None or head is None:
            return None
        # the embedded backend keeps the tokens the head and the prompt share; their text is
        # the texts' common start when that tokenizes to the prompt's first tokens
        shared = os.path.commonprefix([rendered, head])
        kept, ids = self.tokens.tokenize_prompt(shared), self.tokens.tokenize_prompt(rendered)
        if not kept or len(kept) >= len(ids) or ids[:len(kept)] != kept \
                or len(kept) != common_prefix(self.tokens.tokenize_prompt(head), ids):
            return None
        return shared

"""OpenAICompatLLM: the LLM protocol over any OpenAI-compatible HTTP server, with httpx and no
SDK. It puts together the transport, the server's flavour and tokenizer (a ServerSession),
structured output (StructureForms) and option scoring (ChoiceScorer); see the package
docstring for what each does."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx

from faithrag.errors import ConfigError
from faithrag.llm.base import (
    ChoiceRequest,
    ChoiceScores,
    Completion,
    GenerationRequest,
    Message,
    decoding_cap,
)
from faithrag.llm.openai.bias import logit_bias_payload
from faithrag.llm.openai.replies import first_choice, messages_json
from faithrag.llm.openai.scoring import ChoiceScorer
from faithrag.llm.openai.session import ServerSession
from faithrag.llm.openai.structure import StructureForms, may_be_schema_reply
from faithrag.llm.openai.transport import Transport
from faithrag.llm.tokenizers import LocalTokenizer, load_tokenizer

# Approximate chat accounting when no template is available: per-message markup (role markers,
# separators) and boilerplate such as a default system prompt that some templates add
# (SmolLM2's and Qwen2.5's are about 20 tokens). Errs on the high side, as a context guard should.
APPROX_TOKENS_PER_MESSAGE = 8
APPROX_TOKENS_PER_CHAT = 32


class OpenAICompatLLM:
    """The LLM protocol against an OpenAI-compatible server.

    base_url: the API root including /v1, e.g. "http://127.0.0.1:8000/v1".
    model: the server's model name (sent as "model"; also this backend's `name`).
    tokenizer: "server", a preset name, a .gguf path or a tokenizer.json path (see the package
        docstring), or a LocalTokenizer.
    timeout: seconds per HTTP attempt (connecting is capped at 10 s).
    max_retries: extra attempts after a connection error, timeout, 429 or 5xx.
    concurrency: requests in flight at once in `generate`, `score_choices` and
        `score_choices_many`, so that an engine such as vLLM batches them; results keep the input
        order.
    logit_bias_cap: most entries sent in `logit_bias` (e.g. 300 for api.openai.com); None = all.
    context_window: used when the server does not report its own; when both are known the
        smaller one wins; with neither, a local GGUF tokenizer's trained context length.
    backoff: first retry delay in seconds (doubled each retry, with +-50 % jitter).
    transport: an httpx transport (tests use httpx.MockTransport).
    constrain: False sends no structure (schema or grammar) at all.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        tokenizer: str | LocalTokenizer = "server",
        timeout: float = 120.0,
        max_retries: int = 3,
        concurrency: int = 4,
        logit_bias_cap: int | None = None,
        context_window: int | None = None,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        constrain: bool = True,
    ):
        if concurrency < 1 or max_retries < 0 or timeout <= 0:
            raise ConfigError(
                f"Bad OpenAI backend settings: concurrency={concurrency}, max_retries="
                f"{max_retries}, timeout={timeout}.",
                "concurrency >= 1, max_retries >= 0 and timeout > 0 are required.")
        self.name = model
        self._transport = Transport(base_url, api_key, timeout, max_retries, backoff,
                                    concurrency, transport)
        self.base_url = self._transport.base_url
        self.root_url = self._transport.root_url
        self._model = model
        self._cap = logit_bias_cap
        self._configured_context = context_window
        local = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
        self._session = ServerSession(self._transport, model, local)
        self._tokens = self._session.tokens
        self._scorer = ChoiceScorer(self._session)
        self._forms = StructureForms(self.base_url)
        self.constrain = constrain

    # ----------------------------------------------------------------- lifecycle
    def close(self) -> None:
        self._transport.close()

    def forget_scores(self) -> None:
        """Drop the log-probs remembered from earlier choice scoring (forced tokens and grammar
        runs), so that the next scoring asks the server again; tokenizations and the
        capability probe's verdicts are kept."""
        self._scorer.forget()

    # ----------------------------------------------------------------- protocol: tokenizer
    @property
    def context_window(self) -> int:
        """The smaller of the server's own (llama-server /props, vLLM max_model_len) and the
        configured one; with neither, the local GGUF tokenizer's trained context length."""
        self._session.ensure_info()
        known = [n for n in (self._session.server_context, self._configured_context) if n]
        if known:
            return min(known)
        trained = getattr(self._tokens.local, "context_length", None)
        if trained:
            return int(trained)
        raise ConfigError(
            f"The server at {self.base_url} does not report its context window, and no local "
            "GGUF tokenizer says it.",
            "Pass --n-ctx (llm.n_ctx) with the value the server was started with.")

    @property
    def vocab_size(self) -> int:
        if self._tokens.local is not None:
            return self._tokens.local.vocab_size
        self._session.ensure_info()
        if self._session.server_vocab is None:
            raise ConfigError(
                f"The server at {self.base_url} does not report its vocabulary size.",
                "Pass the served model's tokenizer (tokenizer=<preset|model.gguf|tokenizer.json>).")
        return self._session.server_vocab

    def tokenize(self, text: str) -> list[int]:
        """Ids of `text` without BOS, control-token markup read as plain text where the server
        lets us choose (see faithrag.llm.openai.tokens)."""
        return self._tokens.tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self._tokens.detokenize(ids)

    def render_chat(self, messages: Sequence[Message]) -> str | None:
        """The prompt text the server builds from `messages`, when we can know it (a local
        tokenizer's chat template, or llama-server's /apply-template); None otherwise."""
        return self._tokens.render_chat(messages)

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        """Exact when the chat template is known (a local GGUF's template, vLLM's /tokenize with
        messages, llama-server's /apply-template); otherwise an estimate: content tokens +
        APPROX_TOKENS_PER_MESSAGE per message + APPROX_TOKENS_PER_CHAT, meant to err high."""
        counted = self._tokens.count_chat_tokens(messages)
        if counted is not None:
            return counted
        return (sum(len(self.tokenize(m.content)) + APPROX_TOKENS_PER_MESSAGE for m in messages)
                + APPROX_TOKENS_PER_CHAT)

    def check_answer_scoring(self, stage: str) -> None:
        """ConfigError naming `stage` when this backend cannot score options after a partial
        answer (a ChoiceRequest with an answer_prefix), as choice_scoring, csrag_choices,
        csrag_json_scored and cot_json_scored do: that needs the served model's chat template,
        which tokenizer='server' gets only from llama-server's /apply-template. Costs the
        tokenizer probe (made once) and, on llama-server, one template request."""
        probe = (Message("user", "q"),)
        if self.render_chat(probe) is None:
            local = self._tokens.local
            raise ConfigError(
                f"Stage '{stage}' scores answer options after a partial answer, which needs "
                f"the served model's chat template, and {self.root_url} with tokenizer="
                f"'{local.name if local else 'server'}' gives none.",
                "Pass the served model's GGUF or preset as --tokenizer (llm.tokenizer).")

    # ----------------------------------------------------------------- protocol: generation
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """One chat completion per request, `concurrency` in flight at once, in input order."""
        return self._transport.map(self._generate_one, list(requests))

    def _generate_one(self, request: GenerationRequest) -> Completion:
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": messages_json(request.messages),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        if request.stop:
            payload["stop"] = list(request.stop)
        warnings: list[str] = []
        if request.bias:
            payload["logit_bias"], warnings = logit_bias_payload(request.bias, self._cap)
        if request.logprobs:
            # llama-cpp-python returns no log-probs unless top_logprobs is set as well
            payload["logprobs"], payload["top_logprobs"] = True, 0
        start = time.perf_counter()
        kept = self._session.kept_prefix_text(request)
        if kept is None:
            data, constrained = self._post_structured(payload, request, warnings)
        else:  # read the kept head on its own first, as the embedded backend does
            with self._session.fresh_lock:
                self._session.read_from_empty(kept)
                data, constrained = self._post_structured(payload, request, warnings)
        seconds = time.perf_counter() - start
        choice = first_choice(data, self.base_url + "/chat/completions")
        text = (choice.get("message") or {}).get("content") or ""
        if constrained and request.schema is not None and not may_be_schema_reply(
                text, choice.get("finish_reason"), request.stop):
            self._forms.say_once("ignored", warnings, "the server's reply to a JSON schema is "
                                 "not JSON: it may ignore response_format; replies are read "
                                 "tolerantly")

        token_logprobs = None
        if request.logprobs:
            content = (choice.get("logprobs") or {}).get("content")
            if content is None:
                warnings.append("the server returned no log-probs")
            else:
                token_logprobs = [float(t["logprob"]) for t in content]
        usage = data.get("usage") or {}
        prompt_tokens, completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if prompt_tokens is None or completion_tokens is None:
            warnings.append("the server reported no token usage; counts are estimates")
            try:
                estimated = self.count_chat_tokens(request.messages), len(self.tokenize(text))
            except ConfigError:  # no tokenizer to count with: the answer still counts
                estimated = (sum(len(m.content) for m in request.messages) // 4, len(text) // 4)
            prompt_tokens = estimated[0] if prompt_tokens is None else prompt_tokens
            completion_tokens = estimated[1] if completion_tokens is None else completion_tokens
        return Completion(
            text=text,
            prompt_tokens=int(prompt_tokens),
            completion_tokens=int(completion_tokens),
            finish_reason=choice.get("finish_reason") or "stop",
            seconds=seconds,
            token_logprobs=token_logprobs,
            warnings=warnings,
        )

    def _post_structured(self, payload: dict[str, Any], request: GenerationRequest,
                         warnings: list[str]) -> tuple[Any, bool]:
        """The chat completion, with the request's structure when it has one and `constrain`
        is on (faithrag.llm.openai.structure), and whether it went constrained."""
        if not (self.constrain and request.structured):
            return self._session.post("/chat/completions", payload), False
        return self._forms.send(self._session.post, payload, request, warnings,
                                lambda: self._constrained_cap(request))

    def _constrained_cap(self, request: GenerationRequest) -> int:
        """`decoding_cap` for `request` sent with its structure: the room the context window
        leaves after the prompt (counted as `count_chat_tokens` counts it); max_tokens when the
        window or the prompt's size cannot be known here."""
        try:
            room = self.context_window - self.count_chat_tokens(request.messages)
        except ConfigError:
            return request.max_tokens
        return decoding_cap(request, True, room)

    # ----------------------------------------------------------------- protocol: choices
    def score_choices_many(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceScores]:
        """`score_choices` of each request, `concurrency` in flight at once, in input order (an
        engine with prefix caching then reads a shared prompt prefix once)."""
        return self._transport.map(self.score_choices, list(requests))

    def score_choices(self, request: ChoiceRequest) -> ChoiceScores:
        """Log-probability of each choice as the start of the assistant's answer, bias applied;
        exact (or within a stated bound under a bias), or a ServerRejectedError says why not.
        The ways it is read, and their conditions: faithrag.llm.openai.scoring."""
        return self._scorer.score(request)

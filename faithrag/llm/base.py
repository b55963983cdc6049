"""The LLM protocol every backend implements, and the request/response types it speaks.

A backend offers four things: generation (batched), choice scoring, its tokenizer, and the size
of its context window. A static per-request `TokenBias` is added to the logits at every decoding
step, on every backend: as one dense vector (llama.cpp, transformers) or as `logit_bias`
(OpenAI-compatible servers).

A request asks for structure with `schema` (a JSON schema) or `grammar` (a GBNF grammar, llama.cpp's
format); a backend that can constrain decoding makes the reply match it (the bias shifts the
logits, the structure masks them), one that cannot sends the request unconstrained and says so
in the completion's warnings, so callers always keep a tolerant reader for the reply. A
constrained reply may run past `max_tokens` to close its structure (`decoding_cap`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from faithrag.errors import ConfigError


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class TokenBias:
    """A static additive logit bias: `logits[ids[j]] += values[j]` at every step.

    Ids are unique and sorted. Build it with `from_mapping` or `combine`; backends turn it into a
    dense vector once per request (`dense`) or into an OpenAI `logit_bias` map.
    """

    ids: np.ndarray  # int64, unique, sorted
    values: np.ndarray  # float32, same length

    @classmethod
    def from_mapping(cls, bias: Mapping[int, float]) -> TokenBias:
        ids = np.array(sorted(bias), dtype=np.int64)
        values = np.array([bias[i] for i in ids.tolist()], dtype=np.float32)
        return cls(ids, values)

    @classmethod
    def from_sets(cls, weighted_sets: Sequence[tuple[float, Sequence[int] | set[int]]]) -> TokenBias:
        """Sum of `weight * indicator(set)` terms, e.g. [(alpha, T_p), (beta, T_c)]."""
        total: dict[int, float] = {}
        for weight, ids in weighted_sets:
            for i in {int(x) for x in ids}:
                total[i] = total.get(i, 0.0) + float(weight)
        return cls.from_mapping({i: v for i, v in total.items() if v != 0.0})

    @classmethod
    def empty(cls) -> TokenBias:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))

    def __len__(self) -> int:
        return int(self.ids.size)

    def __bool__(self) -> bool:
        return self.ids.size > 0

    def dense(self, n_vocab: int) -> np.ndarray:
        """The bias as a float32 vector of length n_vocab (ids beyond the vocabulary are dropped)."""
        vec = np.zeros(n_vocab, dtype=np.float32)
        keep = self.ids < n_vocab
        vec[self.ids[keep]] = self.values[keep]
        return vec

    def as_dict(self) -> dict[int, float]:
        return {int(i): float(v) for i, v in zip(self.ids, self.values)}


def check_recurring_head(messages: Sequence[Message], cache_prefix: int,
                         cache_prefix_text: str) -> None:
    """ValueError unless `cache_prefix` counts leading messages of `messages` and
    `cache_prefix_text` begins the message after them."""
    if not 0 <= cache_prefix <= len(messages):
        raise ValueError(f"cache_prefix must be between 0 and {len(messages)} "
                         f"(the number of messages), got {cache_prefix}")
    if cache_prefix_text and not (cache_prefix < len(messages)
                                  and messages[cache_prefix].content.startswith(cache_prefix_text)):
        raise ValueError("cache_prefix_text must begin the message after the cache_prefix "
                         "leading messages")


@dataclass(frozen=True)
class GenerationRequest:
    messages: tuple[Message, ...]
    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    bias: TokenBias | None = None
    logprobs: bool = False  # return the log-probability of each generated token
    seed: int = 0
    purpose: str = ""  # free label recorded in the trace ("draft", "facts", ...)
    # how many leading messages recur across many calls (system prompt, few-shot turns): a hint
    # that lets a backend keep their keys/values between calls (llama.cpp with llm.prefix_cache;
    # servers such as vLLM or llama.cpp server cache shared prefixes on their own)
    cache_prefix: int = 0
    # and the leading text of the message after them that recurs as well (e.g. the question and
    # passages, when only the instruction that follows them changes from call to call)
    cache_prefix_text: str = ""
    # keep that recurring prefix between calls even when the backend's prefix cache is off
    # (llama.cpp: the prefix is evaluated on its own and snapshotted, so the result is still a
    # function of the request): for a prompt head that a later request will read again, such
    # as the plain answer prompt's passages, which the verifier's reflection re-reads
    keep_prefix: bool = False
    # the structure the reply must have, at most one of the two: a JSON schema (a dict; the
    # subset that llama.cpp's converter and OpenAI-compatible servers take: object, properties,
    # required, enum, string maxLength/pattern, array maxItems, number, integer, boolean) or a
    # GBNF grammar whose rule "root" is the whole reply
    schema: Mapping[str, Any] | None = field(default=None, hash=False)
    grammar: str | None = None

    @property
    def structured(self) -> bool:
        return self.schema is not None or self.grammar is not None

    def __post_init__(self) -> None:
        if self.schema is not None and self.grammar is not None:
            raise ValueError("a request takes a schema or a grammar, not both")
        check_recurring_head(self.messages, self.cache_prefix, self.cache_prefix_text)


# A structured reply's free text is bounded at this many characters per token of its request's
# max_tokens (faithrag/methods/schemas.py), which ordinary English text (about four characters per
# token) stays within; text denser in tokens (digits, which many tokenizers split one by one) may
# need more tokens than max_tokens to reach the end of the structure.
CHARS_PER_TOKEN = 3


def cut_at_stop(text: str, stops: Sequence[str]) -> str:
    """`text` up to the first place any of `stops` occurs (empty stop strings ignored)."""
    for stop in stops:
        if stop and stop in text:
            text = text[:text.index(stop)]
    return text


def decoding_cap(request: GenerationRequest, constrained: bool, room: int) -> int:
    """Tokens a backend decodes at most for `request`: its max_tokens; or, when the backend
    makes the reply follow the request's schema or grammar (`constrained`), up to
    CHARS_PER_TOKEN × max_tokens, as far as the `room` the context window leaves after the
    prompt allows (never below max_tokens).

    A structure bounds its whole reply at about CHARS_PER_TOKEN characters per max_tokens token
    and every token adds text, so a constrained reply reaches the end of its structure before
    this cap unless it averages under one character per token (JSON escapes such as \\uXXXX,
    characters of several bytes, whitespace the JSON grammar allows between its parts) or the
    room runs out. An unconstrained reply has no such bound and keeps max_tokens."""
    if not (constrained and request.structured):
        return request.max_tokens
    return max(request.max_tokens, min(CHARS_PER_TOKEN * request.max_tokens, room))


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" | "length"
    seconds: float
    token_logprobs: list[float] | None = None
    cached: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def mean_logprob(self) -> float | None:
        if not self.token_logprobs:
            return None
        return float(sum(self.token_logprobs) / len(self.token_logprobs))


@dataclass(frozen=True)
class ChoiceRequest:
    """Score each choice as a continuation of the assistant turn (after `answer_prefix`)."""

    messages: tuple[Message, ...]
    choices: tuple[str, ...]
    answer_prefix: str = ""
    bias: TokenBias | None = None
    purpose: str = ""
    # the recurring prompt head, as on GenerationRequest: a request scored after a generation
    # whose head was kept (`keep_prefix`) reads only what follows it
    cache_prefix: int = 0
    cache_prefix_text: str = ""
    keep_prefix: bool = False

    def __post_init__(self) -> None:
        check_recurring_head(self.messages, self.cache_prefix, self.cache_prefix_text)


@dataclass
class ChoiceScores:
    choices: tuple[str, ...]
    logprobs: list[float]  # sum of token log-probs of each choice, bias applied
    token_counts: list[int]
    prompt_tokens: int
    seconds: float
    warnings: list[str] = field(default_factory=list)  # e.g. approximations a backend made
    shared_pass: bool = False  # read off another result's forward pass: cost nothing more
    # the most `probabilities()` can differ from the exact ones (0.0: exact); a server backend
    # that bounds a bias's normaliser from top log-probs sets it
    probability_error: float = 0.0

    @property
    def best(self) -> int:
        return int(np.argmax(self.logprobs))

    @property
    def mean_logprobs(self) -> list[float]:
        return [lp / max(n, 1) for lp, n in zip(self.logprobs, self.token_counts)]

    def probabilities(self) -> list[float]:
        """Softmax over the choices' total log-probs (renormalised among the choices)."""
        m = max(self.logprobs)
        exps = [math.exp(lp - m) for lp in self.logprobs]
        z = sum(exps)
        return [e / z for e in exps]


@runtime_checkable
class LLM(Protocol):
    """What every backend offers. Methods depend on this, never on a concrete backend."""

    name: str  # model identity recorded in manifests (preset, path or server model)

    @property
    def context_window(self) -> int: ...

    @property
    def vocab_size(self) -> int: ...

    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text` without special tokens (BOS etc.)."""
        ...

    def detokenize(self, ids: Sequence[int]) -> str: ...

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of `messages` after the chat template, for the context guard."""
        ...

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete each request; backends may batch or run them concurrently."""
        ...

    def score_choices(self, request: ChoiceRequest) -> ChoiceScores: ...


# what a model must offer to be given where a loaded model is expected (the protocol's calls)
LLM_METHODS = ("generate", "score_choices", "tokenize", "detokenize", "count_chat_tokens")
BACKENDS = ("llamacpp", "openai", "transformers", "fake")  # the values of llm.backend


def require_llm(value: Any, argument: str = "llm") -> LLM:
    """`value`, when it is a loaded model (it has every call of the LLM protocol); else a
    ConfigError naming `argument`, whose hint for a backend's or model's name given in its
    place is the setting that takes that name."""
    missing = [m for m in LLM_METHODS if not callable(getattr(value, m, None))]
    if not missing:
        return value
    load = "faithrag.load_llm(config.llm) (or faithrag.FakeLLM in tests)"
    if isinstance(value, str):
        setting = "backend" if value in BACKENDS else "model"
        raise ConfigError(f"{argument} must be a loaded model (the LLM protocol), not the name "
                          f"{value!r}.",
                          f"To choose the model by name pass {setting}={value!r} to "
                          f"Pipeline.from_config (it loads config.llm); {argument}= takes "
                          f"{load}.")
    raise ConfigError(f"{argument} must be a loaded model (the LLM protocol); the "
                      f"{type(value).__name__} given has no {', '.join(missing)}.",
                      f"Pass {argument}={load}, or leave it out to load config.llm.")


def user_prompt(content: str, system: str | None = None) -> tuple[Message, ...]:
    msgs = [Message("system", system)] if system else []
    msgs.append(Message("user", content))
    return tuple(msgs)


def model_identity(llm: LLM) -> str:
    """`Backend:model`, the same for a model and for replicas of it: what caches of model
    outputs are keyed on, so that a run on two copies reuses what a run on one wrote. A wrapper
    that only adds checks around a model (it names the model `wrapped`) has that model's."""
    while getattr(llm, "wrapped", None) is not None:
        llm = llm.wrapped  # type: ignore[attr-defined]
    copies = getattr(llm, "copies", None)
    return f"{type(copies[0] if copies else llm).__name__}:{llm.name}"


def score_choices_under(llm: LLM, request: ChoiceRequest,
                        biases: Sequence[TokenBias | None]) -> list[ChoiceScores]:
    """`request`'s choices scored under each of `biases` (its own `bias` is ignored).

    A backend with a `score_choices_under` method reads every bias off one forward pass (a bias
    only shifts the logits the choice tokens are scored from, never the tokens themselves); any
    other backend gets one `score_choices` call per bias. Either way the result for a bias is the
    one `score_choices` gives with that bias."""
    shared = getattr(llm, "score_choices_under", None)
    if shared is not None:
        return shared(request, biases)
    return [llm.score_choices(replace(request, bias=b)) for b in biases]


def score_choices_many(llm: LLM, requests: Sequence[ChoiceRequest]) -> list[ChoiceScores]:
    """Each request scored as `score_choices` scores it, in input order.

    A backend with a `score_choices_many` method takes them as one call: the embedded backend
    keeps the common token prefix of consecutive prompts, as `generate` does for a list, so
    requests that share a long prefix (one passage judged against several claims) read it once;
    a server backend sends them concurrently. Any other backend gets one `score_choices` call
    per request."""
    many = getattr(llm, "score_choices_many", None)
    if many is not None:
        return many(requests)
    return [llm.score_choices(request) for request in requests]


def generate_then_score(llm: LLM, request: GenerationRequest,
                        follow_up: Callable[[Completion], ChoiceRequest],
                        biases: Sequence[TokenBias | None]) -> tuple[Completion, list[ChoiceScores]]:
    """`request` generated, then the choices of `follow_up(completion)` scored under each of
    `biases`: for a reply whose last part is picked by scoring, the slot built from what the
    model wrote.

    A backend with a `generate_then_score` method does both in one call and scores from the
    generation's cache, so the prompt and the reply that the slot repeats are not read twice;
    any other backend gets `generate`, then `score_choices_under`."""
    own = getattr(llm, "generate_then_score", None)
    if own is not None:
        return own(request, follow_up, biases)
    completion = llm.generate([request])[0]
    return completion, score_choices_under(llm, follow_up(completion), biases)

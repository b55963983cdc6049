"""Embedded llama.cpp backend (llama-cpp-python), with exact control of prompt tokens and logits.

Implements `faithrag.llm.base.LLM` (tokenization, generation, choice scoring), with
`score_choices_many` and `generate_then_score` done in one call each.

Contract:
- Prompts are rendered with the GGUF's own chat template (`tokenizer.chat_template`, through
  llama-cpp-python's Jinja2ChatFormatter). Control tokens (`<|im_start|>` ...) are parsed only
  where the template put them; message contents are tokenized as plain text, so a retrieved
  passage that contains "<|im_end|>" cannot close its turn.
- Decoding is greedy at temperature 0. At temperature > 0 it samples from the full biased
  softmax (no top-k/top-p) with a numpy generator seeded by (constructor seed, request seed).
  A request's token bias is one dense vector added to the logits at every step; token log-probs
  are the log-softmax of the biased logits (temperature 1).
- A call's results are a function of its arguments: every call starts from an empty cache, so
  reruns and resumed runs reproduce them exactly on one machine and build. Within a call,
  `generate(list)` runs the requests in order and keeps the KV cache of the longest common token
  prefix between consecutive prompts (and with the previous completion), so drafts sharing a
  long prompt pay only for the part that differs. The cache is not reused across calls because
  llama.cpp's logits depend on how a sequence was split into batches (one batch against a cached
  prefix plus a tail), which would make an answer depend on what ran before it.
  `generate_then_score` is one such call: it scores a slot built from its own reply from the
  cache the reply left, instead of reading the prompt again.
- `prefix_cache=True` keeps the prefixes a request marks as recurring (`cache_prefix`: leading
  messages such as a system prompt and few-shot turns; `cache_prefix_text`: the start of the
  message after them) between calls without giving that up: such a prefix is always evaluated on
  its own, from an empty cache, and its keys/values are snapshotted and restored bit for bit when
  it next leads a prompt, so the split is fixed by the request. That split differs from the
  default single batch, so results with and without the option differ slightly.
- `lookup_tokens > 0` (greedy only): after each pick, the tokens that followed the last
  `lookup_ngram` tokens where they occurred before in the prompt or output (faithrag/llm/
  lookup.py) are evaluated with it in one batch; every draft token the model's own pick confirms
  costs no further pass, and the first mismatch drops the rest of the draft from the cache. The
  picks are the same argmax over the same biased logits, but a batch of several tokens rounds
  differently from one token at a time, so a near-tie can fall the other way and long outputs
  can differ from plain decoding.
- A request's `schema` or `grammar` constrains decoding with llama.cpp's grammar sampler
  (faithrag/llm/grammar.py), compiled when the request arrives (a schema or grammar that does
  not compile is a ConfigError before any decoding): the bias shifts the logits, the grammar
  masks them, then the greedy or sampled pick is made; the pick is checked against the grammar
  first and the whole row masked only when the grammar refuses it. Token log-probs stay those
  of the biased logits before the mask (the model's own confidence in what it wrote, not the
  constrained distribution's). Prompt-lookup drafts combine with a grammar: a drafted token is
  kept only when it equals the constrained pick, so every kept token obeys the grammar. A
  constrained reply may run past max_tokens, to `base.decoding_cap`, to close its structure.
  `constrain=False` (config `llm.constrain = false`) ignores schemas and grammars.
- Generation streams (faithrag/llm/streaming.py): after each token the reply so far goes to the
  context's listener, which may end it there; a cancelled run stops at its next token.
- One sequence is decoded at a time (several sequences in one batch do not pay on a CPU).
  Threads default to the usable cores; llama.cpp's threads spin-wait for each other, so on a
  machine whose cores are busy with other processes set `n_threads` (config `llm.n_threads`) to 1.

Why not the high-level `Llama` class: we need model parameters set before loading
(`use_extra_bufts`, see `llamacpp_runtime.avoid_amx_crash`), logits for several positions of one short batch
(choice scoring) without `logits_all=True` (which allocates n_ctx x n_vocab floats), and our own
decoding loop for the per-request bias. The model and context are driven through
llama-cpp-python's thin wrappers (`_internals`) and the llama.cpp C API.

Speed per preset, the cost of the bias, of lookup drafts and of the prefix cache: BENCHMARKS.md,
section "Performance".
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from faithrag.errors import ConfigError, RuntimeUnavailableError
from faithrag.llm.base import (
    ChoiceRequest,
    ChoiceScores,
    Completion,
    GenerationRequest,
    Message,
    TokenBias,
    decoding_cap,
)
from faithrag.llm.budget import check_fits
from faithrag.llm.chat_encoding import ChatEncoder, common_prefix, split_choices
from faithrag.llm.grammar import CompiledGrammars, GrammarMask, gbnf_for
from faithrag.llm.llamacpp_runtime import (
    avoid_amx_crash,
    import_llama_cpp,
    init_backend,
    usable_cores,
)
from faithrag.llm.lookup import LookupDrafter
from faithrag.llm.models import PRESETS, resolve_model
from faithrag.llm.sampling import DenseBias, constrained_pick, log_softmax_at, pick
from faithrag.llm.streaming import emit


class LlamaCppLLM:
    """The LLM protocol on an embedded GGUF model. Thread-safe (one lock around the context)."""

    def __init__(
        self,
        model: str = "default",
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        verbose: bool = False,
        prefix_cache: bool = False,
        max_prefix_snapshots: int = 16,
        lookup_tokens: int = 0,
        lookup_ngram: int = 3,
        constrain: bool = True,
    ):
        path = resolve_model(model)
        self.name = model if model in PRESETS else path.name
        self.path: Path = path
        lib, internals, formatter_cls = import_llama_cpp()
        self._lib = lib
        self._seed = seed
        self._lock = threading.Lock()
        self._closed = False

        init_backend(lib)
        logging.getLogger("llama-cpp-python").setLevel(logging.DEBUG if verbose else logging.ERROR)

        model_params = lib.llama_model_default_params()
        self.extra_bufts_disabled = avoid_amx_crash(lib, model_params)
        try:
            self._model = internals.LlamaModel(
                path_model=str(path), params=model_params, verbose=verbose)
        except ValueError as exc:
            raise RuntimeUnavailableError(
                f"llama.cpp could not load {path}: {exc}",
                "Check that the file is a complete GGUF model supported by llama-cpp-python "
                "0.3.36 (re-assemble presets with `faithrag models pull`).") from exc
        self.n_threads = n_threads or usable_cores()
        ctx_params = lib.llama_context_default_params()
        ctx_params.n_ctx = n_ctx
        ctx_params.n_batch = ctx_params.n_ubatch = min(n_batch, n_ctx)
        ctx_params.n_threads = ctx_params.n_threads_batch = self.n_threads
        self._ctx = internals.LlamaContext(model=self._model, params=ctx_params, verbose=verbose)
        self._n_batch = min(n_batch, n_ctx)
        self._batch = internals.LlamaBatch(n_tokens=self._n_batch, embd=0, n_seq_max=1,
                                           verbose=verbose)
        self._vocab = self._model.vocab
        self._n_ctx = lib.llama_n_ctx(self._ctx.ctx)
        self._n_vocab = lib.llama_vocab_n_tokens(self._vocab)
        self._cached: list[int] = []  # tokens whose keys/values sit in the cache at 0..len-1
        self.prefix_cache = prefix_cache
        self._max_snapshots = max_prefix_snapshots
        self.lookup_tokens = lookup_tokens
        self.lookup_ngram = lookup_ngram
        self.constrain = constrain
        self._grammars = CompiledGrammars(lib, self._vocab)
        # decoding under a grammar: steps taken, picks the grammar refused (then the best
        # candidates were checked), rows masked whole, and the seconds spent in grammar calls
        self.grammar_stats = {"steps": 0, "refused": 0, "masked": 0, "seconds": 0.0}
        # greedy decoding with prompt-lookup drafts: tokens drafted, drafted tokens the picks
        # confirmed, and forward passes that carried a draft
        self.lookup_stats = {"drafted": 0, "accepted": 0, "passes": 0}
        # recurring prompt prefix -> its sequence state, least recently used first
        self._snapshots: OrderedDict[tuple[int, ...], tuple[ctypes.Array, int]] = OrderedDict()

        metadata = self._model.metadata()
        template = metadata.get("tokenizer.chat_template")
        if not template:
            raise ConfigError(
                f"{path.name} has no chat template (tokenizer.chat_template) in its metadata; "
                "it is probably a base model, not an instruction-tuned one.",
                "Use an instruct/chat GGUF, e.g. one of the presets default|fast|tiny.")
        bos, eos = lib.llama_vocab_bos(self._vocab), lib.llama_vocab_eos(self._vocab)
        self._formatter = formatter_cls(
            template=template,
            bos_token=self._model.token_get_text(bos) if bos != -1 else "",
            eos_token=self._model.token_get_text(eos) if eos != -1 else "",
            add_generation_prompt=True,
        )
        self._control = self._control_tokens()
        self._chat = ChatEncoder(
            lambda messages, contents: self._render(contents, messages), self._control,
            lambda text: self._tokenize(text.encode("utf-8"), special=False),
            lambda text: self._tokenize(text.encode("utf-8"), special=True))

    # ----------------------------------------------------------------- protocol: tokenizer
    @property
    def context_window(self) -> int:
        return self._n_ctx

    @property
    def vocab_size(self) -> int:
        return self._n_vocab

    def tokenize(self, text: str) -> list[int]:
        return self._tokenize(text.encode("utf-8"), special=False)

    def detokenize(self, ids: Sequence[int]) -> str:
        self._require_open()
        if not ids:
            return ""
        arr = (self._lib.llama_token * len(ids))(*ids)
        size = 8 * len(ids) + 16
        for _ in range(2):
            buf = ctypes.create_string_buffer(size)
            n = self._lib.llama_detokenize(self._vocab, arr, len(ids), buf, size, False, False)
            if n >= 0:
                return buf.raw[:n].decode("utf-8", errors="replace")
            size = -n
        raise RuntimeError("llama_detokenize failed")

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        return len(self._encode_chat(messages))

    # ----------------------------------------------------------------- protocol: generation
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        encoded = []
        for request in requests:  # check every request before spending time on any
            ids = self._encode_chat(request.messages)
            self._check_fits(len(ids) + request.max_tokens, f"prompt ({len(ids)} tokens) + "
                             f"max_tokens ({request.max_tokens})")
            encoded.append((ids, self._recurring_tokens(request, ids)))
        with self._lock:
            grammars = [self._grammar_of(r) for r in requests]  # compile all before decoding
            self._truncate(0)
            return [self._generate_one(r, ids, recurring, gbnf) for r, (ids, recurring), gbnf
                    in zip(requests, encoded, grammars)]

    def _grammar_of(self, request: GenerationRequest) -> str | None:
        """The request's structure as GBNF, compiled (ConfigError when it does not compile);
        None when it has none or constraining is off."""
        if not self.constrain:
            return None
        gbnf = gbnf_for(request.schema, request.grammar)
        if gbnf is not None:
            self._grammars.compile(gbnf)
        return gbnf

    def _recurring_tokens(self, request: GenerationRequest | ChoiceRequest,
                          prompt: list[int]) -> int:
        """How many leading tokens of `prompt` are the request's recurring messages and text (0
        when neither the prefix cache nor the request's `keep_prefix` asks for it, or nothing
        recurs); at least the last token stays outside."""
        if not (self.prefix_cache or request.keep_prefix):
            return 0
        recurring = list(request.messages[:request.cache_prefix])
        if request.cache_prefix_text:
            role = request.messages[request.cache_prefix].role
            recurring.append(Message(role, request.cache_prefix_text))
        if not recurring:
            return 0
        head = self._encode_chat(recurring)  # its closing tags fall outside the common prefix
        return min(common_prefix(head, prompt), len(prompt) - 1)

    def _generate_one(self, request: GenerationRequest, prompt: list[int],
                      recurring: int = 0, gbnf: str | None = None) -> Completion:
        grammar = self._grammars.mask(gbnf) if gbnf is not None else None
        try:
            return self._decode(request, prompt, recurring, grammar)
        finally:
            if grammar is not None:
                grammar.close()

    def _decode(self, request: GenerationRequest, prompt: list[int], recurring: int,
                grammar: GrammarMask | None) -> Completion:
        start = time.perf_counter()
        bias = DenseBias(request.bias, self._n_vocab)
        rng = np.random.default_rng([self._seed, request.seed]) if request.temperature > 0 else None
        drafter = (LookupDrafter(self.lookup_tokens, self.lookup_ngram)
                   if self.lookup_tokens > 0 and rng is None else None)
        stops = [s for s in request.stop if s]
        pieces: list[bytes] = []
        picked: list[int] = []
        logprobs: list[float] = []
        text, finish = "", "length"

        self._prefill(prompt, recurring)
        rows = [self._last_logits().copy()]  # logits awaiting a pick, one per evaluated position
        draft: list[int] = []  # evaluated after the last pick, not yet confirmed by a pick
        offered = 0  # size of the current draft
        cap = decoding_cap(request, grammar is not None, self._n_ctx - len(prompt))
        for step in range(cap):
            scores = rows.pop(0)
            bias(None, scores)
            token = pick(scores, request.temperature, rng)
            if grammar is not None:
                token = self._grammar_pick(token, scores, request.temperature, rng, grammar)
                if token is None:  # the grammar admits nothing more
                    finish = "stop"
                    break
            if self._lib.llama_vocab_is_eog(self._vocab, token):
                finish = "stop"
                break
            if request.logprobs:
                top = scores.max()
                logprobs.append(float(scores[token] - top - np.log(np.exp(scores - top).sum())))
            picked.append(token)
            pieces.append(self._piece(token))
            text = b"".join(pieces).decode("utf-8", errors="replace")
            cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
                break
            if not emit(text):  # the listener ends the reply here (finish stays "length")
                break
            if draft and draft[0] == token:  # the pick confirms the next drafted token
                draft.pop(0)
                self.lookup_stats["accepted"] += 1
                if not draft and drafter:
                    drafter.kept(offered, offered)
                continue
            if draft and drafter:  # rejected: its keys/values leave the cache
                self._rewind(len(draft))
                drafter.kept(offered, offered - len(draft))
                draft, rows = [], []
            if step + 1 < cap:
                if drafter:  # never evaluate past the token budget
                    draft = drafter.propose(prompt + picked, cap - step - 2)
                if draft:
                    offered = len(draft)
                    self.lookup_stats["drafted"] += offered
                    self.lookup_stats["passes"] += 1
                    rows = list(self._extend([token, *draft], all_logits=True))
                else:
                    self._extend([token])
                    rows = [self._last_logits().copy()]
        return Completion(
            text=text,
            prompt_tokens=len(prompt),
            completion_tokens=len(pieces),
            finish_reason=finish,
            seconds=time.perf_counter() - start,
            token_logprobs=logprobs if request.logprobs else None,
        )

    def _grammar_pick(self, token: int, scores: np.ndarray, temperature: float,
                      rng: np.random.Generator | None, grammar: GrammarMask) -> int | None:
        """`token` if the grammar admits it, else the constrained pick; the grammar is advanced
        past the result (unless it ends generation) and the time counted in grammar_stats."""
        start = time.perf_counter()
        stats = self.grammar_stats
        stats["steps"] += 1
        if not grammar.allows(token):
            stats["refused"] += 1
            token = self._constrained_pick(scores, temperature, rng, grammar)
        if token is not None and not self._lib.llama_vocab_is_eog(self._vocab, token):
            grammar.accept(token)
        stats["seconds"] += time.perf_counter() - start
        return token

    def _constrained_pick(self, scores: np.ndarray, temperature: float,
                          rng: np.random.Generator | None, grammar: GrammarMask) -> int | None:
        """sampling.constrained_pick, a masked row counted in grammar_stats."""
        token, masked = constrained_pick(scores, temperature, rng, grammar)
        self.grammar_stats["masked"] += masked
        return token

    # ----------------------------------------------------------------- protocol: choices
    def score_choices(self, request: ChoiceRequest) -> ChoiceScores:
        """Log-probability of each choice as the continuation of the assistant turn after
        `answer_prefix`, with the bias added to the logits at every position.

        Each choice is tokenized together with the prompt (so a boundary merge such as a
        trailing space joining the choice's first word is scored as the model would see it);
        the tokens after the prompt's common prefix are the choice's. The shared prefix is
        evaluated once, its last token in a batch of its own (a split llama-cpp-python's server
        can repeat for every request, see `_prefill_last_alone`); each choice then evaluates
        only its own tokens (minus the last, whose logits are not needed), all positions in one
        batch. Single-token choices cost nothing beyond the prompt."""
        return self.score_choices_under(request, [request.bias])[0]

    def score_choices_under(self, request: ChoiceRequest,
                            biases: Sequence[TokenBias | None]) -> list[ChoiceScores]:
        """`score_choices` under each bias, from one forward pass: the unbiased logit rows of
        every choice token are computed once and each bias is added to a copy. The result for
        a bias is identical to `score_choices` with it (same batches, same rows); the others
        are marked `shared_pass`."""
        with self._lock:
            self._truncate(0)
            return self._score_under(request, biases)

    def score_choices_many(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceScores]:
        """`score_choices` of each request, in one call that keeps the common token prefix of
        consecutive prompts in the cache (as `generate` does for a list): a request pays only
        for what its prompt does not share with the previous one. Still a function of the
        arguments; the first result equals a separate `score_choices` call, the others differ
        from one slightly where their prompt was read as a cached prefix plus a tail (see the
        module docstring)."""
        with self._lock:
            self._truncate(0)
            return [self._score_under(request, [request.bias])[0] for request in requests]

    def generate_then_score(self, request: GenerationRequest,
                            follow_up: Callable[[Completion], ChoiceRequest],
                            biases: Sequence[TokenBias | None]
                            ) -> tuple[Completion, list[ChoiceScores]]:
        """`request` generated from an empty cache, then `follow_up(completion)` scored under
        each bias from the cache the generation left: the common token prefix (usually the
        prompt and most of the reply) is not evaluated again. Still a function of the arguments,
        but the scores differ slightly from a separate `score_choices_under` call, whose prompt
        is evaluated in one batch rather than as a prompt plus one token at a time (see the
        module docstring)."""
        ids = self._encode_chat(request.messages)
        self._check_fits(len(ids) + request.max_tokens,
                         f"prompt ({len(ids)} tokens) + max_tokens ({request.max_tokens})")
        recurring = self._recurring_tokens(request, ids)
        with self._lock:
            gbnf = self._grammar_of(request)
            self._truncate(0)
            completion = self._generate_one(request, ids, recurring, gbnf)
            return completion, self._score_under(follow_up(completion), biases)

    def _score_under(self, request: ChoiceRequest,
                     biases: Sequence[TokenBias | None]) -> list[ChoiceScores]:
        """The choices scored under each bias, re-using the cached common prefix."""
        start = time.perf_counter()
        split = split_choices(self._encode_chat, request)
        base, fulls, owns, shared = split.base, split.fulls, split.owns, split.shared
        for full in fulls:
            self._check_fits(len(full), f"prompt with choice ({len(full)} tokens)")
        dense = [DenseBias(b, self._n_vocab) for b in biases]

        logprobs: list[list[float]] = [[] for _ in biases]
        recurring = self._recurring_tokens(request, base[:shared])
        if recurring > common_prefix(self._cached, base[:shared]):
            self._load_prefix(base[:recurring])  # a head kept by an earlier generation
        self._prefill_last_alone(base[:shared])
        first_row = self._last_logits().copy()
        for full, own in zip(fulls, owns):
            targets = full[own:]
            if not targets:
                for lps in logprobs:
                    lps.append(0.0)
                continue
            self._truncate(shared)  # drop the previous choice's tokens
            rows = self._extend(full[shared:-1], all_logits=True) if len(full) - 1 > shared \
                else np.empty((0, self._n_vocab), dtype=np.float32)
            # row for predicting position t is first_row if t == shared else rows[t-shared-1]
            rows = np.vstack([first_row[None, :], rows])[own - shared:]
            for lps, bias in zip(logprobs, dense):
                lps.append(float(log_softmax_at(bias(None, rows.copy()), targets).sum()))
        seconds = time.perf_counter() - start
        counts = [len(full) - own for full, own in zip(fulls, owns)]
        return [ChoiceScores(choices=tuple(request.choices), logprobs=lps, token_counts=counts,
                             prompt_tokens=len(base), seconds=seconds if i == 0 else 0.0,
                             shared_pass=i > 0)
                for i, lps in enumerate(logprobs)]

    # ----------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Free the context and model now (they are also freed when garbage-collected)."""
        with self._lock:
            self._closed = True
            self._grammars.close()
            self._batch.close()
            self._ctx.close()
            self._model.close()
            self._cached = []
            self._snapshots.clear()

    # ----------------------------------------------------------------- internals
    def _check_fits(self, needed: int, what: str) -> None:
        check_fits(needed, self._n_ctx, what)

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeUnavailableError(f"The model {self.name} was closed.",
                                          "Create a new LlamaCppLLM.")

    def _tokenize(self, data: bytes, special: bool) -> list[int]:
        self._require_open()
        size = len(data) + 8
        for _ in range(2):
            buf = (self._lib.llama_token * size)()
            n = self._lib.llama_tokenize(self._vocab, data, len(data), buf, size, False, special)
            if n >= 0:
                return list(buf[:n])
            size = -n
        raise RuntimeError("llama_tokenize failed")

    def _piece(self, token: int) -> bytes:
        size = 64
        for _ in range(2):
            buf = ctypes.create_string_buffer(size)
            n = self._lib.llama_token_to_piece(self._vocab, token, buf, size, 0, False)
            if n >= 0:
                return buf.raw[:n]
            size = -n
        raise RuntimeError("llama_token_to_piece failed")

    def _control_tokens(self) -> dict[str, int]:
        """Texts of the control tokens that llama.cpp would parse out of a prompt."""
        lib, wanted = self._lib, self._lib.LLAMA_TOKEN_ATTR_CONTROL | self._lib.LLAMA_TOKEN_ATTR_UNKNOWN
        control: dict[str, int] = {}
        for token in range(self._n_vocab):
            if lib.llama_vocab_get_attr(self._vocab, token) & wanted:
                text = lib.llama_vocab_get_text(self._vocab, token).decode("utf-8", "replace")
                if text:
                    control.setdefault(text, token)
        return control

    def _render(self, contents: Sequence[str], messages: Sequence[Message]) -> str:
        chat = [{"role": m.role, "content": c} for m, c in zip(messages, contents)]
        return self._formatter(messages=chat).prompt

    def _encode_chat(self, messages: Sequence[Message], suffix: str = "") -> list[int]:
        return self._chat.encode(messages, suffix)

    def _last_logits(self) -> np.ndarray:
        ptr = self._lib.llama_get_logits_ith(self._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))

    def _prefill(self, prompt: list[int], recurring: int = 0) -> None:
        """Make the cache hold `prompt` with the logits of its last position ready, re-using the
        cached common prefix (at least the last token is always evaluated, for its logits).
        When that is shorter than the `recurring` prefix, the recurring prefix comes from its
        snapshot instead (evaluated on its own and snapshotted the first time)."""
        keep = min(common_prefix(self._cached, prompt), len(prompt) - 1)
        if recurring > keep:
            self._load_prefix(prompt[:recurring])
            keep = recurring
        self._truncate(keep)
        self._extend(prompt[keep:])

    def _prefill_last_alone(self, prompt: list[int]) -> None:
        """`_prefill`, but the prompt's last token is evaluated in a batch of its own: the split
        an OpenAI-compatible llama-cpp-python server can be made to repeat for every request on
        one prompt, so choices scored there and here get the same logits."""
        keep = min(common_prefix(self._cached, prompt), len(prompt) - 1)
        self._truncate(keep)
        if keep < len(prompt) - 1:
            self._extend(prompt[keep:-1])
        self._extend(prompt[-1:])

    def _load_prefix(self, prefix: list[int]) -> None:
        """Make the cache hold exactly `prefix`, as evaluated alone from an empty cache."""
        lib, ctx, key = self._lib, self._ctx.ctx, tuple(prefix)
        self._truncate(0)
        snapshot = self._snapshots.get(key)
        if snapshot is not None:
            self._snapshots.move_to_end(key)
            state, size = snapshot
            if lib.llama_state_seq_set_data(ctx, state, size, 0) > 0:
                self._cached = list(prefix)
                return
            self._truncate(0)  # could not restore (e.g. no free cells): evaluate it again
            del self._snapshots[key]
        self._extend(prefix)
        capacity = lib.llama_state_seq_get_size(ctx, 0)
        state = (ctypes.c_uint8 * capacity)()
        size = lib.llama_state_seq_get_data(ctx, state, capacity, 0)
        if size > 0:
            self._snapshots[key] = (state, size)
            while len(self._snapshots) > self._max_snapshots:
                self._snapshots.popitem(last=False)

    def _rewind(self, n: int) -> None:
        """Drop the last `n` cached tokens (re-evaluating the rest if the model's memory cannot
        drop a tail)."""
        keep = self._cached[:len(self._cached) - n]
        self._truncate(len(keep))
        if len(self._cached) < len(keep):
            self._extend(keep[len(self._cached):])

    def _truncate(self, keep: int) -> None:
        mem = self._lib.llama_get_memory(self._ctx.ctx)
        if not self._lib.llama_memory_seq_rm(mem, 0, keep, -1):  # recurrent models: all or none
            self._lib.llama_memory_clear(mem, True)
            keep = 0
        del self._cached[keep:]

    def _extend(self, tokens: Sequence[int], all_logits: bool = False) -> np.ndarray | None:
        """Evaluate `tokens` after the cached ones. With all_logits, return a copy of the logits
        of every position (len(tokens) x n_vocab); otherwise only the last row is kept, in the
        context, for `_last_logits`."""
        rows = []
        n_past = len(self._cached)
        for i in range(0, len(tokens), self._n_batch):
            chunk = list(tokens[i:i + self._n_batch])
            self._batch.set_batch(chunk, n_past=n_past, logits_all=all_logits)
            try:
                self._ctx.decode(self._batch)
            except RuntimeError:
                self._cached = []
                self._lib.llama_memory_clear(self._lib.llama_get_memory(self._ctx.ctx), True)
                raise
            self._cached.extend(chunk)
            n_past += len(chunk)
            if all_logits:
                ptr = self._lib.llama_get_logits(self._ctx.ctx)
                rows.append(np.ctypeslib.as_array(ptr, shape=(len(chunk), self._n_vocab)).copy())
        if all_logits:
            return np.concatenate(rows) if rows else np.empty((0, self._n_vocab), np.float32)
        return None

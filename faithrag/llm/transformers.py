"""Hugging Face transformers backend (optional extra `faithrag[hf]`): a GGUF preset or file, or a
local Hugging Face model directory, run with PyTorch.

torch and transformers are imported when the backend is created, never at import time, so the
base install stays torch-free. A GGUF is dequantized on load (`from_pretrained(dir,
gguf_file=...)`), so memory is that of the unquantized model in `torch_dtype`.

Semantics follow the llama.cpp backend, so both give the same prompt tokens for the same GGUF:
- prompts are the model's own chat template; control tokens are parsed only where the template
  put them, message contents are tokenized as plain text (a passage containing "<|im_end|>"
  cannot close its turn);
- the per-request `TokenBias` is one dense tensor, built once per call, added to the logits at
  every step by `DenseBiasLogitsProcessor` (also usable with any `model.generate`, see
  `dense_bias_processor`);
- greedy at temperature 0; at temperature > 0, sampling from the full biased softmax divided by
  the temperature (no top-k or top-p); token log-probs are those of the biased distribution
  (before temperature); stop strings end a sequence as soon as its text contains one (a
  StoppingCriteria) and are cut from the text;
- a request's `schema` or `grammar` (GBNF) constrains decoding with xgrammar's Hugging Face
  logits processor (`xgrammar.contrib.hf.LogitsProcessor`, in the `hf` extra), applied after the
  bias: the bias shifts the logits, the grammar masks them; token log-probs are read before the
  mask, as on llama.cpp. A schema or grammar xgrammar cannot compile is a ConfigError before any
  decoding; `constrain=False` ignores both;
- `score_choices` sums the biased log-probs of each choice's tokens after the assistant-turn
  prefix, the prompt being evaluated once for all choices.

`generate(list)` is where this backend differs: requests are decoded together, left-padded to
the longest prompt, in batches of up to `max_batch` (grouped by temperature and seed, sorted by
prompt length to limit padding). Each decoding step is then one forward pass for the whole
batch instead of one per request, which is the gain over a loop. Greedy results equal decoding
each request alone up to float rounding (a near-tie between two tokens could resolve differently
in bfloat16). A batch's wall time is shared equally among its completions, so `seconds` add up
to the time spent.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from faithrag.errors import (
    ConfigError,
    MissingExtraError,
    ModelNotFoundError,
    RuntimeUnavailableError,
)
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
from faithrag.llm.chat_encoding import ChatEncoder, split_choices
from faithrag.llm.models import PRESETS, resolve_model

FEATURE = "The transformers backend"
CPU_TORCH_NOTE = (
    "Without a GPU install the CPU build of torch first: pip install torch --index-url "
    "https://download.pytorch.org/whl/cpu (plain `pip install torch` pulls the CUDA build, "
    "several gigabytes).")
_DTYPES = ("float32", "bfloat16", "float16")


@functools.cache
def _runtime() -> SimpleNamespace:
    """torch, transformers and the torch classes of this backend, imported on first use."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise MissingExtraError(FEATURE, "hf", f"Importing it failed: {exc}. {CPU_TORCH_NOTE}"
                                ) from exc

    class DenseBiasLogitsProcessor(transformers.LogitsProcessor):
        """Adds one dense bias tensor to the scores at every decoding step: shape (vocab,) for
        every row, or (batch, vocab) with one row per sequence. Built once, never per step."""

        def __init__(self, bias: torch.Tensor):
            self.bias = bias

        def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
            return scores + self.bias

    class TokenLogprobRecorder(transformers.LogitsProcessor):
        """Records the log-prob of each chosen token under the final scores, without keeping the
        scores of every step: put it last; it sees step t's scores and, at step t+1, the token
        chosen from them. `finish` takes the last token from the returned sequences."""

        def __init__(self) -> None:
            self.steps: list[torch.Tensor] = []  # (batch,) per decoding step
            self._pending: torch.Tensor | None = None

        def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
            if self._pending is not None:
                self.steps.append(self._pending.gather(1, input_ids[:, -1:]).squeeze(1))
            self._pending = torch.log_softmax(scores.float(), dim=-1)
            return scores

        def finish(self, sequences: torch.LongTensor, n_generated: int) -> torch.Tensor:
            """(n_generated, batch) log-probs; `sequences` end with the last generated token."""
            if len(self.steps) < n_generated and self._pending is not None:
                self.steps.append(self._pending.gather(1, sequences[:, -1:]).squeeze(1))
                self._pending = None
            return torch.stack(self.steps[:n_generated]) if n_generated else torch.zeros(0, 0)

    class StopCriteria(transformers.StoppingCriteria):
        """Per row: done after `max_new[row]` tokens, or once its generated text contains one of
        `stops[row]`. `done_at[row]` is the number of tokens it had when it was done."""

        def __init__(self, prompt_width: int, max_new: list[int], stops: list[tuple[str, ...]],
                     decode: Callable[[list[int]], str]):
            self.prompt_width = prompt_width
            self.max_new = max_new
            self.stops = stops
            self.decode = decode
            self.done_at: list[int | None] = [None] * len(max_new)

        def __call__(self, input_ids: torch.LongTensor, scores: object, **kwargs) -> torch.BoolTensor:
            n_new = input_ids.shape[1] - self.prompt_width
            for row, stops in enumerate(self.stops):
                if self.done_at[row] is not None:
                    continue
                if n_new >= self.max_new[row] or (stops and any(
                        s in self.decode(input_ids[row, self.prompt_width:].tolist()) for s in stops)):
                    self.done_at[row] = n_new
            return torch.tensor([d is not None for d in self.done_at], dtype=torch.bool,
                                device=input_ids.device)

    return SimpleNamespace(torch=torch, transformers=transformers,
                           DenseBiasLogitsProcessor=DenseBiasLogitsProcessor,
                           TokenLogprobRecorder=TokenLogprobRecorder, StopCriteria=StopCriteria)


def dense_bias_processor(biases: TokenBias | Sequence[TokenBias | None], vocab_size: int,
                         device: object = "cpu"):
    """A `transformers.LogitsProcessor` that adds `biases` to the logits at every step of any
    `model.generate`: one TokenBias for every row, or one per row of the batch (None: no bias).
    `vocab_size` is the logits dimension (ids beyond it are dropped)."""
    rt = _runtime()
    if isinstance(biases, TokenBias):
        dense = biases.dense(vocab_size)
    else:
        dense = np.stack([b.dense(vocab_size) if b else np.zeros(vocab_size, np.float32)
                          for b in biases])
    return rt.DenseBiasLogitsProcessor(rt.torch.from_numpy(dense).to(device))



def _model_source(model: str) -> tuple[str, Path, str | None]:
    """(name, directory, gguf file name or None) for a preset, a .gguf path or an HF directory."""
    directory = Path(model).expanduser()
    if directory.is_dir() and (directory / "config.json").is_file():
        return directory.name, directory, None
    try:
        path = resolve_model(model)
    except ModelNotFoundError as exc:
        raise ModelNotFoundError(
            f"'{model}' is neither a preset ({', '.join(PRESETS)}), an existing .gguf file, nor a "
            "Hugging Face model directory (with config.json).", exc.hint) from exc
    return (model if model in PRESETS else path.name), path.parent, path.name


class TransformersLLM:
    """The LLM protocol on a Hugging Face causal LM (see the module doc). Thread-safe (one lock
    around the model).

    `model`: a preset (default|fast|tiny), a .gguf path or a local HF model directory.
    `n_ctx`: the context window, capped at the model's maximum positions (default: that maximum).
    `n_threads`: torch's intra-op threads (process-wide); default: torch's own choice.
    `torch_dtype`: float32 | bfloat16 | float16. bfloat16 halves memory and is fast on CPUs with
        AVX512-BF16 or AMX (several times float32's prompt speed there); elsewhere prefer
        float32. float16 is slow on most CPUs.
    `max_batch`: the most requests decoded together by `generate`.
    `seed`: combined with each request's seed for sampling at temperature > 0.
    """

    def __init__(
        self,
        model: str = "default",
        n_ctx: int | None = None,
        n_threads: int | None = None,
        torch_dtype: str = "bfloat16",
        max_batch: int = 8,
        seed: int = 0,
        constrain: bool = True,
    ):
        if torch_dtype not in _DTYPES:
            raise ConfigError(f"Unknown torch_dtype '{torch_dtype}'.", f"Use one of {', '.join(_DTYPES)}.")
        if max_batch < 1:
            raise ConfigError(f"max_batch must be at least 1 (got {max_batch}).", "Pass max_batch >= 1.")
        self.name, directory, gguf_file = _model_source(model)
        rt = _runtime()
        self._rt = rt
        torch, transformers = rt.torch, rt.transformers
        if n_threads:
            torch.set_num_threads(n_threads)

        start = time.perf_counter()
        try:
            self._tok = transformers.AutoTokenizer.from_pretrained(
                str(directory), gguf_file=gguf_file, local_files_only=True)
            self._model = transformers.AutoModelForCausalLM.from_pretrained(
                str(directory), gguf_file=gguf_file, local_files_only=True,
                dtype=getattr(torch, torch_dtype))
        except ImportError as exc:  # gguf or accelerate missing
            raise MissingExtraError(FEATURE, "hf",
                                    f"transformers cannot load {model}: {exc}.") from exc
        except (OSError, ValueError) as exc:
            raise RuntimeUnavailableError(
                f"transformers cannot load {model}: {exc}",
                "Check that the model is complete and that this transformers version supports "
                "its architecture (and, for a GGUF, its quantization type).") from exc
        self._model.eval()
        self.load_seconds = time.perf_counter() - start

        if not self._tok.chat_template:
            raise ConfigError(
                f"{model} has no chat template; it is probably a base model, not an "
                "instruction-tuned one.", "Use an instruct/chat model, e.g. a preset default|fast|tiny.")
        self._device = self._model.device
        self._vocab = int(self._model.get_output_embeddings().weight.shape[0])
        self._window = self._context_window(n_ctx)
        self._control = {t.content: i for i, t in self._tok.added_tokens_decoder.items()
                         if t.special and t.content}
        self._chat = ChatEncoder(self._render, self._control, self.tokenize,
                                 self._tokenize_special)

        # Decoding uses only what we pass: a model's own defaults (sampling, repetition penalty)
        # must not leak in, but its end-of-turn tokens must.
        eos = self._model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        if self._tok.eos_token_id is not None and self._tok.eos_token_id not in eos:
            eos.append(self._tok.eos_token_id)
        if not eos:
            raise ConfigError(f"{model} defines no end-of-sequence token.",
                              "Use a chat model whose tokenizer has an eos token.")
        self._eos = eos
        self.constrain = constrain
        self._grammar_compiler = None  # xgrammar's, built on the first structured request
        self._pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else eos[0]
        self._model.generation_config = transformers.GenerationConfig(
            eos_token_id=eos, pad_token_id=self._pad, bos_token_id=self._tok.bos_token_id)
        self._seed = seed
        self.max_batch = max_batch
        self._lock = threading.Lock()

    def _context_window(self, n_ctx: int | None) -> int:
        limit = getattr(self._model.config, "max_position_embeddings", None)
        if not limit and 0 < self._tok.model_max_length < 10**7:
            limit = self._tok.model_max_length
        if n_ctx and limit:
            return min(n_ctx, int(limit))
        if n_ctx or limit:
            return int(n_ctx or limit)
        raise ConfigError(f"{self.name} states no maximum length.", "Pass n_ctx.")

    # ----------------------------------------------------------------- protocol: tokenizer
    @property
    def context_window(self) -> int:
        return self._window

    @property
    def vocab_size(self) -> int:
        return self._vocab

    def tokenize(self, text: str) -> list[int]:
        return list(self._tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    def detokenize(self, ids: Sequence[int]) -> str:
        """Text of `ids`; control tokens render as nothing (as with llama.cpp)."""
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=True,
                                clean_up_tokenization_spaces=False)

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        return len(self._encode_chat(messages))

    # ----------------------------------------------------------------- protocol: generation
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        prompts = []
        for request in requests:  # check every request before spending time on any
            ids = self._encode_chat(request.messages)
            self._check_fits(len(ids) + request.max_tokens,
                             f"prompt ({len(ids)} tokens) + max_tokens ({request.max_tokens})")
            prompts.append(ids)
        structures = [self._structure_key(r) for r in requests]
        compiled = {key: self._compile(key) for key in set(structures) if key is not None}
        groups: dict[tuple[float, int, tuple[str, str] | None], list[int]] = {}
        for i, request in enumerate(requests):
            key = (request.temperature, request.seed) if request.temperature > 0 else (0.0, 0)
            groups.setdefault((*key, structures[i]), []).append(i)
        out: list[Completion | None] = [None] * len(requests)
        with self._lock:
            for (temperature, seed, structure), members in groups.items():
                members.sort(key=lambda i: len(prompts[i]))
                for at in range(0, len(members), self.max_batch):
                    batch = members[at:at + self.max_batch]
                    done = self._generate_batch([requests[i] for i in batch],
                                                [prompts[i] for i in batch], temperature, seed,
                                                compiled.get(structure))
                    for i, completion in zip(batch, done):
                        out[i] = completion
        return out  # type: ignore[return-value]

    def _structure_key(self, request: GenerationRequest) -> tuple[str, str] | None:
        """("schema", its JSON) or ("grammar", its GBNF); None without structure or constraint."""
        if not self.constrain or not request.structured:
            return None
        if request.schema is not None:
            return "schema", json.dumps(request.schema, sort_keys=True)
        return "grammar", request.grammar or ""

    def _compile(self, key: tuple[str, str]):
        """xgrammar's compiled grammar for a structure key; ConfigError when it does not compile."""
        try:
            import xgrammar
        except ImportError as exc:
            raise MissingExtraError(
                "Constrained decoding on the transformers backend", "hf",
                f"Importing xgrammar failed: {exc}. Or set llm.constrain = false.") from exc
        if self._grammar_compiler is None:
            info = xgrammar.TokenizerInfo.from_huggingface(self._tok, vocab_size=self._vocab)
            self._grammar_compiler = xgrammar.GrammarCompiler(info)
        kind, text = key
        try:
            if kind == "schema":
                return self._grammar_compiler.compile_json_schema(text)
            return self._grammar_compiler.compile_grammar(text)
        except Exception as exc:  # xgrammar raises RuntimeError/ValueError from its C++ core
            raise ConfigError(f"xgrammar cannot compile the request's {kind}: {exc}",
                              "Check GenerationRequest.schema / .grammar, or turn constrained "
                              "decoding off with llm.constrain = false.") from exc

    def _generate_batch(self, requests: list[GenerationRequest], prompts: list[list[int]],
                        temperature: float, seed: int, grammar=None) -> list[Completion]:
        """One padded batch decoded together; `grammar`: xgrammar's compiled grammar that every
        request of the batch shares, or None."""
        rt = self._rt
        torch = rt.torch
        start = time.perf_counter()
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: every prompt ends at `width`
            input_ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt):] = 1

        processors = rt.transformers.LogitsProcessorList()
        if any(r.bias for r in requests):
            processors.append(dense_bias_processor([r.bias for r in requests], self._vocab,
                                                   self._device))
        recorder = rt.TokenLogprobRecorder() if any(r.logprobs for r in requests) else None
        if recorder is not None:
            processors.append(recorder)
        if grammar is not None:  # after the recorder: log-probs are read before the mask
            from xgrammar.contrib.hf import LogitsProcessor as GrammarProcessor
            processors.append(GrammarProcessor([grammar] * len(requests)))
        max_new = [decoding_cap(r, grammar is not None, self._window - width) for r in requests]
        stopper = rt.StopCriteria(width, max_new, [tuple(s for s in r.stop if s) for r in requests],
                                  self._decode_text)
        if temperature > 0:
            torch.manual_seed(int(np.random.SeedSequence([self._seed, seed]).generate_state(1)[0]))
            sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        else:
            sampling = {"do_sample": False}
        with torch.inference_mode():
            sequences = self._model.generate(
                input_ids=input_ids.to(self._device), attention_mask=mask.to(self._device),
                max_new_tokens=max(max_new), logits_processor=processors,
                stopping_criteria=rt.transformers.StoppingCriteriaList([stopper]),
                eos_token_id=self._eos, pad_token_id=self._pad, **sampling)
        generated = sequences[:, width:].tolist()
        logprobs = recorder.finish(sequences, len(generated[0])).T.tolist() if recorder else None
        seconds = (time.perf_counter() - start) / len(requests)

        completions = []
        for row, request in enumerate(requests):
            tokens = generated[row][:stopper.done_at[row] or max_new[row]]
            finish = "length"
            eos_at = next((j for j, t in enumerate(tokens) if t in self._eos), None)
            if eos_at is not None:
                tokens, finish = tokens[:eos_at], "stop"
            text = self._decode_text(tokens)
            cut = min((i for i in (text.find(s) for s in request.stop if s) if i >= 0), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
            completions.append(Completion(
                text=text,
                prompt_tokens=len(prompts[row]),
                completion_tokens=len(tokens),
                finish_reason=finish,
                seconds=seconds,
                token_logprobs=logprobs[row][:len(tokens)] if request.logprobs else None,
            ))
        return completions

    def _decode_text(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    # ----------------------------------------------------------------- protocol: choices
    def score_choices(self, request: ChoiceRequest) -> ChoiceScores:
        """Log-probability of each choice as the continuation of the assistant turn after
        `answer_prefix`, with the bias added to the logits at every position.

        Each choice is tokenized together with the prompt (a boundary merge, such as the prefix's
        trailing space joining the choice's first word, is scored as the model sees it); the
        tokens after the common prefix with the prompt are the choice's. The shared prefix is
        evaluated once; its key/value cache is then repeated for all choices, which evaluate only
        their own tokens (minus the last), in one right-padded batch."""
        torch = self._rt.torch
        start = time.perf_counter()
        split = split_choices(self._encode_chat, request)
        base, fulls, owns, shared = split.base, split.fulls, split.owns, split.shared
        for full in fulls:
            self._check_fits(len(full), f"prompt with choice ({len(full)} tokens)")
        bias = (torch.from_numpy(request.bias.dense(self._vocab)).to(self._device)
                if request.bias else None)
        rests = [full[shared:-1] for full in fulls]  # inputs whose logits predict full[shared+1:]
        width = max((len(r) for r in rests), default=0)

        with self._lock, torch.inference_mode():
            head = self._model(input_ids=torch.tensor([base[:shared]], device=self._device),
                               use_cache=width > 0, logits_to_keep=1)
            first_row = head.logits[0, -1:].float()  # predicts full[shared]
            if width:
                cache = head.past_key_values
                cache.batch_repeat_interleave(len(fulls))
                ids = torch.full((len(fulls), width), self._pad, dtype=torch.long)
                mask = torch.zeros((len(fulls), shared + width), dtype=torch.long)
                mask[:, :shared] = 1
                for i, rest in enumerate(rests):  # right padding keeps real positions in place
                    ids[i, :len(rest)] = torch.tensor(rest, dtype=torch.long)
                    mask[i, shared:shared + len(rest)] = 1
                rows = self._model(input_ids=ids.to(self._device), attention_mask=mask.to(self._device),
                                   past_key_values=cache, use_cache=True).logits.float()
            logprobs: list[float] = []
            for i, (full, own) in enumerate(zip(fulls, owns)):
                targets = full[own:]
                if not targets:
                    logprobs.append(0.0)
                    continue
                # row predicting position t is first_row if t == shared, else rows[i, t-shared-1]
                logits = first_row if not rests[i] else torch.cat([first_row, rows[i, :len(rests[i])]])
                logits = logits[own - shared:]
                if bias is not None:
                    logits = logits + bias
                picked = torch.log_softmax(logits, dim=-1).gather(
                    1, torch.tensor(targets, device=self._device)[:, None])
                logprobs.append(float(picked.sum()))
        return ChoiceScores(
            choices=tuple(request.choices),
            logprobs=logprobs,
            token_counts=[len(full) - own for full, own in zip(fulls, owns)],
            prompt_tokens=len(base),
            seconds=time.perf_counter() - start,
        )

    # ----------------------------------------------------------------- internals
    def _check_fits(self, needed: int, what: str) -> None:
        check_fits(needed, self._window, what)

    def _render(self, messages: Sequence[Message], contents: Sequence[str]) -> str:
        chat = [{"role": m.role, "content": c} for m, c in zip(messages, contents)]
        return self._tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)

    def _tokenize_special(self, text: str) -> list[int]:
        return list(self._tok(text, add_special_tokens=False)["input_ids"])

    def _encode_chat(self, messages: Sequence[Message], suffix: str = "") -> list[int]:
        return self._chat.encode(messages, suffix)

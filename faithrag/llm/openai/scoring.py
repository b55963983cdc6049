"""Option scoring over an OpenAI-compatible server: the log-probability of each choice as the
start of the assistant's answer, bias applied; exact, or a ServerRejectedError ("Could not
score the choices ...") says why not. Probabilities are never made up from log-probs the server
did not give.

The choices' tokens are those of the rendered prompt + answer_prefix + choice after its common
prefix with the prompt (a token merged across the boundary is the choice's) when the chat
template is known (local GGUF, llama-server's /apply-template); otherwise, with no
answer_prefix, the choice tokenized alone.

Servers report log-probs before `logit_bias`; the bias's value for each scored token is added
here, and its normaliser at that position, log Z = log sum_v p(v) exp(b_v), is subtracted where
it differs between choices. A position after the same prompt text in every choice (the first
one, when all choices start at the same token) has one normaliser for all: it cancels in
`probabilities()` and is left out, so under a bias the log-probs are those of the choices up to
a term common to all of them (differences, `best` and `probabilities()` are exact; an absolute
value is not a log-probability). Any other position's log Z is bounded from its forced reply's
top log-probs (the `top_n` the probe found the server returns), see
faithrag.llm.openai.normalisers. Token ids of listed texts come from a table of every token's
text, built once from the local tokenizer (vLLM lists ids); with tokenizer='server' on a server
that lists texts only the forced tokens are known, which is seldom enough.

(forced) With the chat template, when the capability probe (once per backend;
    faithrag.llm.openai.forced) finds that the server reports a token forced by `logit_bias`
    +100 with its own log-prob: each choice token is one /v1/completions request (max_tokens=1)
    on the prompt text that precedes it, the token forced; the reply must name that token, and
    the prompt text must tokenize to the ids before it. Exact on any such server
    (llama-cpp-python; vLLM, whose log-probs are the model's own by default); under a bias,
    exact or bounded as above. When the probe also finds that a GBNF `grammar` forces a token
    and leaves its log-prob as the model's own (llama-cpp-python), a choice of several tokens is
    first asked in one request whose grammar admits only its text (its tokens favoured by
    `logit_bias` among the spellings the grammar admits); the tokens the server generated must
    be the choice's, else each is asked on its own.
(first token) Otherwise, when each choice is one distinct token at the same position: one
    request with the top 20 log-probs (chat completion without answer_prefix, else
    /v1/completions on the rendered prompt); every choice must be among them.
(echo) Otherwise, with the chat template: /v1/completions with echo=true on prompt + choice,
    one request per choice; refused when the server's prompt log-probs are missing or
    misaligned (llama-server, OpenAI; llama-cpp-python without BOS).
Without forced-token scoring, a bias on choices other than one token each at one position is
refused.
"""

from __future__ import annotations

import time
from typing import Any

from faithrag.errors import ConfigError, ServerRejectedError
from faithrag.llm.base import ChoiceRequest, ChoiceScores
from faithrag.llm.chat_encoding import common_prefix
from faithrag.llm.openai.bias import LOGIT_BIAS_LIMIT
from faithrag.llm.openai.forced import TOP_LOGPROBS, ForcedReply, ForcedTokens
from faithrag.llm.openai.normalisers import bound_normalisers
from faithrag.llm.openai.replies import completion_logprobs, first_choice, messages_json
from faithrag.llm.openai.session import ServerSession


class ChoiceScorer:
    """Scores choices on the server of `session` (see the module docstring)."""

    def __init__(self, session: ServerSession):
        self._session = session
        self._tokens = session.tokens
        self._base_url = session.transport.base_url
        self.forced = ForcedTokens(session)
        self._echo_usable: bool | None = None  # False once echoed log-probs proved unusable

    def forget(self) -> None:
        """Drop the log-probs remembered from earlier scoring and what the server holds."""
        self.forced.forget()
        self._session.forget_held_prompt()

    def score(self, request: ChoiceRequest) -> ChoiceScores:
        """Each choice's log-probability, bias applied, in the first way of the module
        docstring that applies; ServerRejectedError (or ConfigError) when none can be exact."""
        if not request.choices or any(not c for c in request.choices):
            raise ValueError("score_choices needs at least one choice and no empty choices")
        start = time.perf_counter()
        self._session.forget_held_prompt()  # another client may have used the server since
        bias = request.bias.as_dict() if request.bias else {}
        rendered = self._tokens.render_chat(request.messages)
        if rendered is None:
            if request.answer_prefix:
                raise ConfigError(
                    "Could not score the choices: they follow an answer_prefix, and the chat "
                    "template of the served model is unknown (tokenizer='server' on a server "
                    "without a template endpoint), so the prompt cannot be continued.",
                    "Pass the served model's GGUF or preset as --tokenizer (llm.tokenizer).")
            scores = self._score_by_chat(request, bias)
        else:
            context = rendered + request.answer_prefix
            context_ids = self._tokens.tokenize_prompt(context)
            fulls = [self._tokens.tokenize_prompt(context + c) for c in request.choices]
            starts = [common_prefix(context_ids, f) for f in fulls]
            if any(s == len(f) for s, f in zip(starts, fulls)):
                raise ServerRejectedError(
                    "Could not score the choices: a choice adds no token to the prompt.",
                    "Use choices that are text of their own.")
            one_position = (len(set(starts)) == 1
                            and all(len(f) - s == 1 for s, f in zip(starts, fulls)))
            if self.forced.probe().usable:
                scores = self._score_forced(request, context, fulls, starts, bias)
            elif bias and not one_position:
                raise ServerRejectedError(
                    "Could not score the choices exactly: under a logit bias, choices of "
                    "several tokens (or starting at different positions) need each position's "
                    "normaliser, and this server does not report the log-probs of tokens forced "
                    "by logit_bias (the capability probe failed).",
                    "Score these choices with the embedded backend (--llm llamacpp), or serve "
                    "the model with llama-cpp-python's server (python -m llama_cpp.server).")
            elif one_position and starts[0] == len(context_ids) \
                    and len({f[-1] for f in fulls}) == len(fulls):
                scores = self._score_first_tokens(request, [f[-1] for f in fulls], bias,
                                                  context)
            else:
                scores = self._score_by_echo(request, context,
                                             [f[s:] for s, f in zip(starts, fulls)], bias)
            scores.prompt_tokens = scores.prompt_tokens or len(context_ids)
        scores.seconds = time.perf_counter() - start
        return scores

    def _score_forced(self, request: ChoiceRequest, context: str, fulls: list[list[int]],
                      starts: list[int], bias: dict[int, float]) -> ChoiceScores:
        """Each choice token's log-prob from one request that forces it after the prompt text
        before it (a request shared by choices with a common start, or made before with the
        same prompt, is sent once), plus the bias's value for it. Under a bias, a position
        after the same prompt text in every choice has one normaliser, which cancels in the
        probabilities; any other position's is bounded (`bound_normalisers`)."""
        steps = []
        for choice, full, own in zip(request.choices, fulls, starts):
            text = context + choice
            steps.append([(self._tokens.text_before(text, full, k), full[k])
                          for k in range(own, len(full))])
        replies: dict[tuple[str, int], ForcedReply] = {}
        if self.forced.probe().grammar_runs:  # a choice of several tokens in one request
            several = [choice_steps for choice_steps in steps if len(choice_steps) > 1]
            runs = self._session.transport.map(
                lambda c: self.forced.runs_cached(c[0][0], tuple(t for _, t in c)), several)
            for choice_steps, run in zip(several, runs):
                if run is not None:
                    replies.update(zip(choice_steps, run))
        unique = list(dict.fromkeys(step for choice_steps in steps for step in choice_steps))
        asked = [step for step in unique if step not in replies]
        replies.update(zip(asked, self.forced.replies(asked)))
        scores = ChoiceScores(
            choices=tuple(request.choices),
            logprobs=[sum(replies[s].logprob + bias.get(s[1], 0.0) for s in choice_steps)
                      for choice_steps in steps],
            token_counts=[len(choice_steps) for choice_steps in steps],
            prompt_tokens=0,
            seconds=0.0,
        )
        prompts = [{prompt for prompt, _ in choice_steps} for choice_steps in steps]
        shared = set.intersection(*prompts)
        unshared = {step[0]: (step[1], replies[step]) for step in unique if step[0] not in shared}
        if bias and unshared:
            bound_normalisers(scores, prompts, unshared, bias, self.forced)
        return scores

    def _score_by_chat(self, request: ChoiceRequest, bias: dict[int, float]) -> ChoiceScores:
        """No chat template: the choices' first tokens (each choice tokenized alone) from the
        top log-probs of one chat completion; they must be distinct and all present."""
        firsts = [self._tokens.tokenize(c)[:1] for c in request.choices]
        if [] in firsts or len({f[0] for f in firsts}) != len(firsts):
            raise ServerRejectedError(
                "Could not score the choices: they share their first token, so each needs its "
                "own prompt log-probs, and the chat template of the server is unknown.",
                "Pass the served model's GGUF or preset as --tokenizer (llm.tokenizer), or "
                "use choices with distinct first tokens.")
        multi = [c for c in request.choices if len(self._tokens.tokenize(c)) > 1]
        if multi:
            raise ServerRejectedError(
                f"Could not score the choices exactly: {multi} have several tokens, and "
                "without the chat template only first tokens can be scored.",
                "Pass the served model's GGUF or preset as --tokenizer (llm.tokenizer).")
        return self._score_first_tokens(request, [f[0] for f in firsts], bias, None)

    def _score_first_tokens(self, request: ChoiceRequest, firsts: list[int],
                            bias: dict[int, float], context: str | None) -> ChoiceScores:
        """First-token log-probs from one request: chat completion when there is no
        answer_prefix, else /v1/completions on the rendered prompt + answer_prefix."""
        payload: dict[str, Any] = {"model": self._session.model, "max_tokens": 1,
                                   "temperature": 0.0,
                                   **self._session.flavour().token_id_fields()}
        if request.answer_prefix:
            payload.update(prompt=context, logprobs=TOP_LOGPROBS)
            data = self._session.post("/completions", payload)
            logprobs = completion_logprobs(data, self._base_url + "/completions")
            tops = logprobs.get("top_logprobs") or []
            top = dict(tops[0]) if tops and tops[0] else {}
        else:
            payload.update(messages=messages_json(request.messages), logprobs=True,
                           top_logprobs=TOP_LOGPROBS)
            data = self._session.post("/chat/completions", payload)
            content = (first_choice(data, self._base_url + "/chat/completions").get("logprobs")
                       or {}).get("content") or []
            top = {e["token"]: e["logprob"] for e in content[0].get("top_logprobs") or []} \
                if content else {}
        if not top:
            raise ServerRejectedError(
                f"Could not score the choices: {self._base_url} returned no log-probs for a "
                "request that asked for them.",
                "Use a server that returns log-probs (llama-cpp-python needs logits_all, which "
                "its server enables by default).")
        by_id = {int(t[len("token_id:"):]): float(lp) for t, lp in top.items()
                 if t.startswith("token_id:")}
        found = [by_id.get(token) if by_id else top.get(self._tokens.detokenize([token]))
                 for token in firsts]
        missing = [c for c, lp in zip(request.choices, found) if lp is None]
        if missing:
            raise ServerRejectedError(
                f"Could not score the choices: the first token of {missing} is not among the "
                f"server's top {TOP_LOGPROBS} log-probs, and this server offers no exact way "
                "to score it (no forced-token log-probs).",
                "Use a server that reports log-probs of tokens forced by logit_bias "
                "(llama-cpp-python, vLLM) with the served model's GGUF as --tokenizer, or the "
                "embedded backend (--llm llamacpp).")
        logprobs = [float(lp) + bias.get(token, 0.0) for lp, token in zip(found, firsts)]
        usage = data.get("usage") or {}
        return ChoiceScores(
            choices=tuple(request.choices),
            logprobs=logprobs,
            token_counts=[1] * len(firsts),
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            seconds=0.0,
        )

    def _score_by_echo(self, request: ChoiceRequest, context: str, targets: list[list[int]],
                       bias: dict[int, float]) -> ChoiceScores:
        """Each choice's own tokens (`targets`, the last tokens of context + choice) scored
        from the echoed prompt log-probs. The one generated token is forced (logit_bias +100 on
        the choice's first token) so that its echo entry can be checked: it must come last,
        after the prompt's entries, or the entries are misaligned."""
        if self._echo_usable is False:
            raise _echo_unusable_error(self._base_url)

        def score(job: tuple[str, list[int]]) -> tuple[float, int, int]:
            choice, own = job
            forced = own[0]
            data = self._session.post("/completions", {
                "model": self._session.model, "prompt": context + choice, "max_tokens": 1,
                "temperature": 0.0, "echo": True, "logprobs": 0,
                "logit_bias": {str(forced): LOGIT_BIAS_LIMIT}})
            logprobs = completion_logprobs(data, self._base_url + "/completions")
            tokens = logprobs.get("tokens") or []
            values = logprobs.get("token_logprobs") or []
            usage = data.get("usage") or {}
            aligned = (usage.get("completion_tokens") == 1 and len(values) == len(tokens)
                       and len(values) > len(own) and tokens[-1] in
                       (f"token_id:{forced}", self._tokens.detokenize([forced])))
            own_values = values[-1 - len(own):-1] if aligned else []
            if not aligned or any(v is None for v in own_values):
                self._echo_usable = False  # no use asking again
                raise _echo_unusable_error(self._base_url)
            total = sum(float(v) + bias.get(t, 0.0) for v, t in zip(own_values, own))
            return total, len(own), int(usage.get("prompt_tokens", 0)) - len(own)

        results = self._session.transport.map(score, list(zip(request.choices, targets)))
        return ChoiceScores(
            choices=tuple(request.choices),
            logprobs=[r[0] for r in results],
            token_counts=[r[1] for r in results],
            prompt_tokens=results[0][2],
            seconds=0.0,
        )


def _echo_unusable_error(url: str) -> ServerRejectedError:
    return ServerRejectedError(
        f"Could not score the choices: {url}/completions did not return usable prompt log-probs "
        "for echo=true: missing (llama-server, OpenAI) or misaligned (llama-cpp-python when the "
        "prompt does not start with the BOS token).",
        "Use a server that reports log-probs of tokens forced by logit_bias (llama-cpp-python, "
        "vLLM), or the embedded backend (--llm llamacpp).")

"""Listwise LLM ranking (RankGPT style): the model reads numbered passages and writes their
order, "[2] > [3] > [1]". Lists longer than one window are ranked with a sliding window from the
bottom of the list to the top, so strong passages bubble up.

`ListwiseRanker` is the step shared by the plain `listwise` re-ranker (the baseline) and by
`crossval`, which runs it after removing conflicting passages: same prompt, same window.
`passages_prompt` is the numbered-passages prompt both build on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from faithrag.llm.base import LLM, GenerationRequest, Message
from faithrag.llm.budget import fit_evidence
from faithrag.methods.common import DATA_NOT_INSTRUCTIONS, cut_text, generate, render_passages
from faithrag.methods.rank_parsing import parse_permutation, tally
from faithrag.methods.rerank_settings import RerankConfig
from faithrag.methods.schemas import permutation_grammar
from faithrag.types import Passage, Question, Step

if TYPE_CHECKING:
    from faithrag.config import Config

# One system message for every prompt that shows the numbered passages (ranking here, conflict
# detection in crossval): prompts over the same passages then share their prefix, which a backend
# evaluates once when they are sent in one generate() call.
PASSAGES_SYSTEM = ("You read retrieved passages about a question and do the task stated after "
                   "them. " + DATA_NOT_INSTRUCTIONS)
RANK_INSTRUCTION = (
    "Order all {n} passages from the most to the least useful for answering the question. "
    "Write each passage's id in square brackets, best first, separated by \" > \", in the form "
    "[i] > [j] > [k] > ... Write only the ids, do not explain.")


def window_spans(n: int, window: int, step: int) -> list[tuple[int, int]]:
    """[start, end) spans of the sliding window over n items, from the bottom of the list up;
    the last span always starts at 0. One span when the list fits in a window."""
    if window < 1 or not 1 <= step <= window:
        raise ValueError(f"need window >= 1 and 1 <= step <= window, got {window}, {step}")
    if n <= window:
        return [(0, n)] if n else []
    spans = []
    end = n
    while True:
        start = max(0, end - window)
        spans.append((start, end))
        if start == 0:
            return spans
        end -= step


def sliding_window_order(n: int, window: int, step: int,
                         rank_window: Callable[[list[int]], list[int]]) -> list[int]:
    """The final order of items 0..n-1: each span of the current order is replaced by
    `rank_window(items in the span)`, which returns a permutation of range(len(items))."""
    order = list(range(n))
    for start, end in window_spans(n, window, step):
        segment = order[start:end]
        perm = rank_window(segment)
        if sorted(perm) != list(range(len(segment))):
            raise ValueError(f"rank_window returned {perm}, not a permutation of {len(segment)}")
        order[start:end] = [segment[i] for i in perm]
    return order


def passages_prompt(llm: LLM, question: Question, passages: Sequence[Passage],
                    passage_tokens: int, instruction: Callable[[int], str], reserve: int,
                    step: Step, recurring: bool = False) -> tuple[GenerationRequest, int]:
    """System + "Question, numbered passages, task" prompt, fitted to the context window; the
    request (max_tokens = reserve) and how many passages it shows. With `recurring`, everything
    before the task is marked as a prefix that later requests repeat (`cache_prefix_text`)."""
    titles = [p.title for p in passages]

    def render(texts: list[str]) -> tuple[Message, ...]:
        user = (f"Question: {question.text.strip()}\n\n"
                f"Passages:\n{render_passages(texts, titles)}\n\n{instruction(len(texts))}")
        return (Message("system", PASSAGES_SYSTEM), Message("user", user))

    fitted = fit_evidence(llm, render, [cut_text(llm, p.text, passage_tokens) for p in passages],
                          reserve)
    step.warnings.extend(fitted.warnings)
    request = GenerationRequest(fitted.messages, max_tokens=reserve)
    if recurring:
        user = fitted.messages[1].content
        head = user[: len(user) - len(instruction(len(fitted.evidence)))]
        request = replace(request, cache_prefix=1, cache_prefix_text=head)
    return request, len(fitted.evidence)


class ListwiseRanker:
    """Rank passages with listwise prompts and a sliding window; records every window's raw
    output and the parse repairs on the step."""

    def __init__(self, llm: LLM, window: int = 20, step: int = 10, passage_tokens: int = 400):
        window_spans(0, window, step)  # validates the window
        self.llm = llm
        self.window = window
        self.step = step
        self.passage_tokens = passage_tokens

    def window_request(self, question: Question, passages: Sequence[Passage], step: Step
                       ) -> GenerationRequest:
        """The ranking request for passages that form one window."""
        def instruction(n: int) -> str:
            return f"Question: {question.text.strip()}\n{RANK_INSTRUCTION.format(n=n)}"

        request, shown = passages_prompt(self.llm, question, passages, self.passage_tokens,
                                         instruction, 6 * len(passages) + 8, step)  # "[12] > " ~ 5
        return replace(request, purpose="rank", grammar=permutation_grammar(shown))

    def rank(self, question: Question, passages: Sequence[Passage], step: Step,
             reply: str | None = None) -> list[Passage]:
        """`reply`: the model's answer to window_request(passages), already generated (the list
        must fit one window); no call is made then."""
        passages = list(passages)
        if reply is not None and len(passages) > self.window:
            raise ValueError("a ready reply covers one window only")
        raws: list[str] = []
        parsed = []

        def rank_window(indices: list[int]) -> list[int]:
            if len(indices) < 2:  # nothing to order: no call
                return list(range(len(indices)))
            if reply is not None:
                raw = reply
            else:
                request = self.window_request(question, [passages[i] for i in indices], step)
                raw = generate(self.llm, [request], step)[0].text
            result = parse_permutation(raw, len(indices))
            raws.append(raw)
            parsed.append(result)
            return result.order

        order = sliding_window_order(len(passages), self.window, self.step, rank_window)
        ranked = [passages[i] for i in order]
        step.outputs.update({
            "order": [p.id for p in ranked],
            "windows": window_spans(len(passages), self.window, self.step),
            "parse": tally(parsed),
            "raw": raws,
        })
        return ranked


def ranker_from_config(llm: LLM, config: Config) -> ListwiseRanker:
    r: RerankConfig = config.rerank
    return ListwiseRanker(llm, window=r.window, step=r.step, passage_tokens=r.passage_tokens)

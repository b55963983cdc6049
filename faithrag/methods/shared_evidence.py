"""The evidence a detector reads once: the plain answer prompt's head, shared by its requests.

In: the model, the question, the passages and the answer budget. Out: `SharedEvidence`, the head
as the plain answer prompt renders and fits it (system message, every passage that fits, the
question), and requests that add one short instruction after it, each marking the head as a kept
prefix, so that after the plain answer a backend that keeps prefixes (llama.cpp) reads the
evidence once. A passage is pointed at by its number and its first `START_WORDS` words (`start`),
which are quoted outside the passage's frame and so have their tags neutralised.

Example:
    evidence = SharedEvidence.fitted(llm, question, passages, answer_tokens=48, step=step)
    reply = evidence.generation('Passage 1 begins: "..." What does it say?', 48, "passage_answer")
"""

from __future__ import annotations

from dataclasses import dataclass

from faithrag.llm.base import LLM, ChoiceRequest, GenerationRequest, Message
from faithrag.llm.framing import neutralise_tags
from faithrag.methods.common import fit
from faithrag.methods.plain_answer import SYSTEM as ANSWER_SYSTEM
from faithrag.methods.plain_answer import passages_head, render_prompt
from faithrag.retrieval.scorers.llm_judge import CHOICES as YES_NO
from faithrag.types import Passage, Question, Step

ANSWER_STOP = ("\n",)  # an answer is one line
START_WORDS = 12  # of a passage, quoted so the model finds it among the others
INSTRUCTION_TOKENS = 160  # room after the shared head for the longest instruction


@dataclass
class SharedEvidence:
    """The plain answer prompt's head (system message, passages, question) as the generator
    rendered it, and requests that add one instruction to it, marked as its kept prefix."""

    head: str
    passages: list[Passage]
    shown: list[str]  # each passage's text as the head holds it

    @classmethod
    def fitted(cls, llm: LLM, question: Question, passages: list[Passage], answer_tokens: int,
               step: Step) -> SharedEvidence:
        """The head as the plain answer prompt fits it (the same reserve, so the same cut),
        fitted again with room for the instruction when that does not fit after it."""
        titles = [p.title for p in passages]
        render = render_prompt(question, titles)
        fitted = fit(llm, render, passages, answer_tokens, step)
        room = llm.context_window - llm.count_chat_tokens(fitted.messages) - answer_tokens
        if room < INSTRUCTION_TOKENS:
            fitted = fit(llm, render, passages, answer_tokens + INSTRUCTION_TOKENS, step)
        shown = fitted.evidence
        return cls(passages_head(question, shown, titles), passages[:len(shown)], shown)

    def number(self, passage: Passage) -> int:
        return self.passages.index(passage) + 1

    def start(self, number: int) -> str:
        """The first words of passage `number` (1-based) as shown."""
        words = self.shown[number - 1].split()
        start = " ".join(words[:START_WORDS]) + (" …" if len(words) > START_WORDS else "")
        return neutralise_tags(start)  # quoted outside its frame, so it cannot open or close one

    def _messages(self, instruction: str) -> tuple[Message, ...]:
        return (Message("system", ANSWER_SYSTEM), Message("user", self.head + instruction))

    def generation(self, instruction: str, max_tokens: int, purpose: str) -> GenerationRequest:
        """A greedy one-line reply to `instruction` after the head, with token log-probs."""
        return GenerationRequest(self._messages(instruction), max_tokens=max_tokens,
                                 stop=ANSWER_STOP, purpose=purpose, cache_prefix=1,
                                 cache_prefix_text=self.head, keep_prefix=True, logprobs=True)

    def yes_no(self, instruction: str, purpose: str) -> ChoiceRequest:
        return ChoiceRequest(self._messages(instruction), YES_NO, purpose=purpose,
                             cache_prefix=1, cache_prefix_text=self.head, keep_prefix=True)

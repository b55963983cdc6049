"""retrieve -> rerank -> generate -> verify. Every stage but generation is optional; methods plug
in through the protocols in faithrag.methods.base without touching each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from faithrag.errors import ConfigError
from faithrag.methods.base import Generator, RemovedPassage, Reranker, Retriever, Verifier
from faithrag.types import Answer, Passage, Question, Trace


@dataclass
class Result:
    question: Question
    answer: Answer
    passages: list[Passage]  # the evidence the generator saw, in order
    removed: list[RemovedPassage] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question.text,
            "choices": self.question.choices,
            "answer": self.answer.text,
            "choice_index": self.answer.choice_index,
            "parse_status": self.answer.parse_status,
            "reason": self.answer.reason,
            "passages": [{"id": p.id, "title": p.title, "source": p.source, "score": p.score,
                          "text": p.text} for p in self.passages],
            "removed": [{"id": r.passage.id, "reason": r.reason, "text": r.passage.text}
                        for r in self.removed],
            "trace": self.trace.to_dict(),
        }


class Pipeline:
    def __init__(self, generator: Generator, retriever: Retriever | None = None,
                 reranker: Reranker | None = None, verifier: Verifier | None = None, k: int = 5):
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k}", "Set retrieval.k to a positive number.")
        self.generator = generator
        self.retriever = retriever
        self.reranker = reranker
        self.verifier = verifier
        self.k = k

    def run(self, question: Question | str, passages: list[Passage] | None = None,
            trace: Trace | None = None) -> Result:
        """Answer `question` from `passages` if given, else from the retriever (if any). The
        steps are recorded on `trace` (a new one by default), so a caller that passes its own
        keeps the steps that ran when a later one raises."""
        if isinstance(question, str):
            question = Question(text=question)
        trace = Trace() if trace is None else trace
        if passages is None and self.retriever is not None:
            with trace.step("retrieve", type(self.retriever).__name__, query=question.text,
                            k=self.k) as step:
                passages = self.retriever.retrieve(question.text, self.k)
                step.outputs = {"passages": [(p.id, p.score) for p in passages]}
        passages = list(passages or [])
        removed: list[RemovedPassage] = []
        if self.reranker is not None:
            reranked = self.reranker.rerank(question, passages, trace)
            passages, removed = reranked.passages, reranked.removed
        answer = self.generator.generate(question, passages, trace)
        if self.verifier is not None:
            answer = self.verifier.verify(question, passages, answer, trace)
        return Result(question, answer, passages, removed, trace)

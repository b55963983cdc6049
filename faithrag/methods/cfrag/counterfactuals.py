"""Counterfactual queries: generation over the five transformation types, filtering, selection.

One batched LLM call of six short requests gives the model's short closed-book answer to the
question and one variant per type (role, temporal, entity, categorical, scope) with its short
answer; each variant request shows two worked examples as earlier chat turns (the 1.5B default
model copied the question or the placeholders when the examples were inline or when it was asked
for the whole list at once). A variant is kept only when
- its embedding similarity to the question is above the threshold (default 0.7): it stays a
  near miss of the question, and
- its answer differs. Checked cheaply, with no extra call: the two closed-book answers written
  in the same batch are compared with faithrag.answers.same_answer. When either answer is
  missing or "unknown", the check falls back to a lexical one — the variant must change at least
  one content word of the question (a paraphrase asks for the same thing).
Selection is adaptive: the kept variants are ranked by similarity and the top N are taken, one
per type first (so the contrasts differ in kind), then by similarity; fewer than N are used when
fewer pass."""

from __future__ import annotations

import re
from dataclasses import dataclass

from faithrag.answers import same_answer
from faithrag.llm.base import GenerationRequest, Message
from faithrag.methods.cfrag.answers import changes_content
from faithrag.methods.cfrag.parsing import TYPES, CounterfactualList
from faithrag.methods.cfrag.vectors import VectorMemo
from faithrag.methods.schemas import counterfactual_grammar, short_answer_grammar

SYSTEM = ("You write counterfactual variants of questions: questions worded almost like the "
          "original that ask for something else, so their correct answer is different.")
# (what the variant changes, an example for "Who directed the film Jaws?", one for "What is the
# capital of Australia?")
CHANGES = {
    "role": ("asks about a different role or relation",
             "Who composed the music for the film Jaws? => John Williams",
             "What is the largest city of Australia? => Sydney"),
    "temporal": ("changes the time, date or order",
                 "Who directed the sequel Jaws 2? => Jeannot Szwarc",
                 "What was the capital of Australia before 1927? => Melbourne"),
    "entity": ("swaps the main person, place or thing for a similar one",
               "Who directed the film Alien? => Ridley Scott",
               "What is the capital of New Zealand? => Wellington"),
    "categorical": ("asks for a different kind of information about the same thing",
                    "Which studio released the film Jaws? => Universal Pictures",
                    "What is the currency of Australia? => Australian dollar"),
    "scope": ("widens or narrows what is asked",
              "Who directed the films of the Jaws series? => several directors",
              "What are the state capitals of Australia? => six cities"),
}
ANSWER_INSTRUCTION = ("Answer the question from your own knowledge with a short phrase only "
                      '("unknown" if you are not sure).')
VARIANT_INSTRUCTION = (
    "Write a variant of this question that {change}, keeping the rest of its wording, so that "
    'it has a different answer. Then write " => " and the short answer to the variant from your '
    'own knowledge ("unknown" if you are not sure). One line only.')
EXAMPLE_QUESTIONS = ("Who directed the film Jaws?", "What is the capital of Australia?")
_LABEL = re.compile(r"^\s*(?:variant|answer)\s*:\s*", re.IGNORECASE)


def _turn(question: str, instruction: str) -> str:
    return f"Question: {question.strip()}\n\n{instruction}"


def counterfactual_requests(question: str, max_tokens: int) -> list[GenerationRequest]:
    """The closed-book answer to the question, then one variant per type: short, focused
    requests (a small model copes with them better than with one list), each shown two worked
    examples as earlier chat turns, sent together in one call."""
    requests = [GenerationRequest(
        (Message("system", SYSTEM), Message("user", _turn(question, ANSWER_INSTRUCTION))),
        max_tokens=max_tokens, stop=("\n",), purpose="counterfactuals", cache_prefix=1,
        grammar=short_answer_grammar(max_tokens))]
    for t in TYPES:
        change, *examples = CHANGES[t]
        instruction = VARIANT_INSTRUCTION.format(change=change)
        messages = [Message("system", SYSTEM)]
        for example_question, example_reply in zip(EXAMPLE_QUESTIONS, examples):
            messages += [Message("user", _turn(example_question, instruction)),
                         Message("assistant", example_reply)]
        messages.append(Message("user", _turn(question, instruction)))
        requests.append(GenerationRequest(  # all but the question's turn recur across items
            tuple(messages), max_tokens=max_tokens, stop=("\n",), purpose="counterfactuals",
            cache_prefix=len(messages) - 1, grammar=counterfactual_grammar(max_tokens)))
    return requests


@dataclass
class Counterfactual:
    type: str
    question: str
    answer: str | None
    similarity: float
    kept: bool
    check: str  # how "the answer differs" was decided, or why the variant was rejected

    def summary(self) -> dict[str, object]:
        return {"type": self.type, "question": self.question, "answer": self.answer,
                "similarity": round(self.similarity, 3), "kept": self.kept, "check": self.check}


def as_list(replies: list[str]) -> str:
    """The replies (original answer first, then one per type) in the list format the parser
    reads: "ORIGINAL => <answer>" then "<type>: <question> => <answer>" lines."""
    first, *variants = (_LABEL.sub("", r.strip().split("\n", 1)[0]) for r in replies)
    return "\n".join([f"ORIGINAL => {first}"] + [f"{t}: {v}" for t, v in zip(TYPES, variants)])


def screen(question: str, parsed: CounterfactualList, vectors: VectorMemo,
           sim_threshold: float) -> list[Counterfactual]:
    """Every parsed candidate, with its similarity and the keep/reject decision."""
    if not parsed.candidates:
        return []
    sims = vectors.cosine([question], [c.question for c in parsed.candidates])[0]
    seen: set[str] = set()
    screened = []
    for cand, sim in zip(parsed.candidates, sims.tolist()):
        key = " ".join(cand.question.lower().split())
        if key == " ".join(question.lower().split()):
            kept, check = False, "rejected: same as the question"
        elif key in seen:
            kept, check = False, "rejected: duplicate variant"
        elif sim <= sim_threshold:
            kept, check = False, f"rejected: similarity {sim:.3f} <= {sim_threshold}"
        elif parsed.original_answer and cand.answer:
            differs = not same_answer(parsed.original_answer, cand.answer)
            kept = differs
            check = (f"answers differ ({cand.answer!r} vs {parsed.original_answer!r})" if differs
                     else f"rejected: same answer as the question ({cand.answer!r})")
        elif changes_content(question, cand.question):
            kept, check = True, "answer unknown; a content word changed"
        else:
            kept, check = False, "rejected: answer unknown and no content word changed"
        seen.add(key)
        screened.append(Counterfactual(cand.type, cand.question, cand.answer, sim, kept, check))
    return screened


def select(screened: list[Counterfactual], n: int) -> list[Counterfactual]:
    """Top n kept variants: the most similar of each type first, then the rest by similarity."""
    ranked = sorted((c for c in screened if c.kept), key=lambda c: -c.similarity)
    chosen: list[Counterfactual] = []
    types: set[str] = set()
    for c in ranked:
        if len(chosen) < n and c.type not in types:
            chosen.append(c)
            types.add(c.type)
    for c in ranked:
        if len(chosen) < n and c not in chosen:
            chosen.append(c)
    return sorted(chosen, key=lambda c: -c.similarity)

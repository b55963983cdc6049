"""The structure of every reply a stage parses, as the JSON schema or GBNF grammar its request
carries (`GenerationRequest.schema` / `.grammar`), so that a backend that constrains decoding
(faithrag/llm) can only produce a reply the stage's reader understands.

Contract:
- Each structure is the format the stage's prompt already asks for, so the same tolerant reader
  (json_answer.py, judgements.py, rank_parsing.py, cfrag/parsing.py) reads constrained and
  unconstrained replies alike; a backend that cannot constrain just sends the prompt.
- Everything that can grow is bounded: labels come from their fixed set, ids from the ids shown,
  options from the question's options, lists have at most their stated number of items, scores
  are a number in [0, 1] with at most three decimals, and free text (a reason, a claim, a short
  answer) has a character limit.
- A free-text field gets at most `CHARS_PER_TOKEN` characters per token of the reply's budget
  (`max_tokens`) left after the reply's fixed parts, and never more than its own limit: English
  text averages about four characters per token, so a constrained reply ends well before
  `max_tokens`; a backend that constrains lets a structured reply run past it, to
  `faithrag.llm.base.decoding_cap`, so that text denser in tokens (digits) still closes its
  structure.

Example::

    schema = choice_answer_schema(["Paris", "Lyon"], max_tokens=256)
    request = GenerationRequest(messages, max_tokens=256, schema=schema)
    permutation = GenerationRequest(messages, max_tokens=40, grammar=permutation_grammar(5))
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from faithrag.llm.base import CHARS_PER_TOKEN
from faithrag.llm.grammar import gbnf_literal

# cot_json's "Reason" (the prompt asks for at most three sentences): what the default 256 tokens
# hold, since a reason cut short mid-sentence leaves its answer to follow an unfinished argument
REASON_CHARS = 720
VERDICT_REASON_CHARS = 360  # crossval's "one or two sentences"
RATIONALE_CHARS = 240  # CF-RAG's "one sentence"
CLAIM_CHARS = 200  # one short factual statement
SHORT_ANSWER_CHARS = 100  # a name, date, number or a few words
QUESTION_CHARS = 200  # a counterfactual question


def free_chars(max_tokens: int, reserved_chars: int, limit: int) -> int:
    """Characters a free-text field may take (see the module docstring); at least 1."""
    return max(1, min(limit, CHARS_PER_TOKEN * max_tokens - reserved_chars))


def _alternatives(texts: Sequence[str]) -> str:
    return "(" + " | ".join(gbnf_literal(t) for t in dict.fromkeys(texts)) + ")"


def _line(chars: int, minimum: int = 1) -> str:
    """Up to `chars` characters of one line, with no leading space."""
    return f"[^\\n ] [^\\n]{{{max(minimum, 1) - 1},{max(chars, minimum) - 1}}}"


SCORE_RULE = 'score ::= "0" ("." [0-9] [0-9]? [0-9]?)? | "1" ("." "0" "0"? "0"?)?'


# ----------------------------------------------------------------- JSON: cot_json and CSRAG
def choice_answer_schema(choices: Sequence[str], max_tokens: int) -> dict[str, Any]:
    """{"Reason": <at most REASON_CHARS>, "Answer": <one of `choices`>}, Reason first (the
    paper's reason-then-answer order; the scored variant stops at the "Answer" key). Needs at
    least one option (ValueError)."""
    if not choices:
        raise ValueError("a choice answer needs at least one option")
    longest = max((len(json.dumps(c)) for c in choices), default=0)
    reason = free_chars(max_tokens, longest + len('{"Reason": "", "Answer": }'), REASON_CHARS)
    return {
        "type": "object",
        "properties": {"Reason": {"type": "string", "maxLength": reason},
                       "Answer": {"enum": list(dict.fromkeys(choices))}},
        "required": ["Reason", "Answer"],
        "additionalProperties": False,
    }


# ----------------------------------------------------------------- crossval and listwise
def _ids(n: int) -> str:
    if n < 1:
        raise ValueError(f"need at least one id, got n={n}")
    return "id ::= " + " | ".join(gbnf_literal(f"[{i}]") for i in range(1, n + 1))


def conflict_pair_grammar(n: int) -> str:
    """`Conflict: [i] [j]` with ids among the n shown, or `Conflict: None`."""
    return f'root ::= "Conflict: " ("None" | id " " id)\n{_ids(n)}\n'


def permutation_grammar(n: int) -> str:
    """`[a] > [b] > ...`: at most n ids, each among the n shown (repeats and missing ids are left
    to the reader, which repairs and counts them: a grammar cannot forbid repeats compactly)."""
    more = f' (" > " id){{0,{n - 1}}}' if n > 1 else ""
    return f"root ::= id{more}\n{_ids(n)}\n"


def verdict_grammar(max_tokens: int, labels: Sequence[str] = ("A", "B")) -> str:
    """`Reason: <one line>` then `False passage: <A or B>`."""
    reason = free_chars(max_tokens, len("Reason: \nFalse passage: ") + 1, VERDICT_REASON_CHARS)
    return (f'root ::= "Reason: " {_line(reason)} "\\nFalse passage: " '
            f"{_alternatives(labels)}\n")


def labelled_answer_grammar(max_tokens: int, field: str = "ANSWER") -> str:
    """`<FIELD>: <a short answer on one line>` (a side's answer, a reference answer)."""
    answer = free_chars(max_tokens, len(field) + 2, SHORT_ANSWER_CHARS)
    return f"root ::= {gbnf_literal(field + ': ')} {_line(answer)}\n"


# ----------------------------------------------------------------- the verifier (antisyco)
def label_grammar(field: str, labels: Sequence[str], scored: bool = False) -> str:
    """`<FIELD>: <one of labels>`, then `\\nSCORE: <number in [0, 1]>` when `scored`."""
    score = ' "\\nSCORE: " score' if scored else ""
    rules = f"root ::= {gbnf_literal(field + ': ')} {_alternatives(labels)}{score}\n"
    return rules + (SCORE_RULE + "\n" if scored else "")


def claims_grammar(max_claims: int, max_tokens: int) -> str:
    """At most `max_claims` lines `- <claim>`."""
    claim = free_chars(max_tokens // max(max_claims, 1), len("- \n"), CLAIM_CHARS)
    more = f' ("\\n" claim){{0,{max_claims - 1}}}' if max_claims > 1 else ""
    return f'root ::= claim{more}\nclaim ::= "- " {_line(claim, 2)}\n'


# ----------------------------------------------------------------- CF-RAG
def short_answer_grammar(max_tokens: int, choices: Sequence[str] | None = None,
                         yes_or_no: bool = False, prefix: str = "") -> str:
    """`<prefix><answer>`: one of `choices`, yes or no, or a short phrase on one line."""
    if choices:
        answer = _alternatives(choices)
    elif yes_or_no:
        answer = _alternatives(("yes", "no", "Yes", "No"))
    else:
        answer = _line(free_chars(max_tokens, len(prefix), SHORT_ANSWER_CHARS))
    return f"root ::= {gbnf_literal(prefix) + ' ' if prefix else ''}{answer}\n"


def draft_grammar(max_tokens: int, choices: Sequence[str] | None = None,
                  yes_or_no: bool = False) -> str:
    """`Rationale: <one line>` then `Answer: <answer>` (see `short_answer_grammar`)."""
    longest = max((len(c) for c in choices or ()), default=SHORT_ANSWER_CHARS)
    rationale = free_chars(max_tokens, len("Rationale: \nAnswer: ") + longest, RATIONALE_CHARS)
    answer = short_answer_grammar(max_tokens - rationale // CHARS_PER_TOKEN, choices, yes_or_no)
    return (f'root ::= "Rationale: " {_line(rationale)} "\\nAnswer: " answer\n'
            + answer.replace("root ::=", "answer ::=", 1))


def counterfactual_grammar(max_tokens: int) -> str:
    """`<variant question> => <its short answer>` on one line (no "=" inside the question)."""
    question = max(3, free_chars(max_tokens, len(" => ") + SHORT_ANSWER_CHARS // 2,
                                 QUESTION_CHARS))
    answer = free_chars(max_tokens, question + len(" => "), SHORT_ANSWER_CHARS)
    return (f'root ::= [^\\n= ] [^\\n=]{{2,{question - 1}}} "=>" " "? {_line(answer)}\n')

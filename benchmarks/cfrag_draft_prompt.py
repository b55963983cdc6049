"""Does asking the model to write a rationale cost CF-RAG's drafts answers, on the same evidence?

For each of the first --limit items, the top --k passages BM25 retrieves from the item's own
paragraphs (as `faithrag eval --context item_retrieval --distractors 0`) are answered with
three prompts, one LLM call each:
- vanilla: vanilla RAG's short-answer prompt, which is also CF-RAG's draft prompt when the
  rationale is extracted (`cfrag.rationale = "extracted"`, the default);
- rationale_first: CF-RAG's draft prompt when the model writes the rationale
  (`cfrag.rationale = "generated"`): "Rationale: <...>" then "Answer: <...>";
- answer_first: that format with the two lines swapped.
Answers are scored by smart EM; the table gives each prompt's accuracy and, against vanilla, the
items only one of the two got right with McNemar's exact p. One JSON line per item is appended
to --out as it finishes (gold answers are not written); re-running resumes.

    python benchmarks/cfrag_draft_prompt.py --dataset hotpotqa_distractor --limit 20 \
      --threads 1 --out runs/cfrag/draft-prompt.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from faithrag.answers import smart_em
from faithrag.config import Config
from faithrag.eval.datasets import load_dataset
from faithrag.eval.stats import mcnemar_exact_p
from faithrag.llm import load_llm
from faithrag.llm.base import GenerationRequest, Message
from faithrag.methods.cfrag.drafting import (
    DRAFT_STOP,
    DRAFT_SYSTEM,
    answer_slot,
    draft_request,
)
from faithrag.methods.cfrag.parsing import parse_hypothesis
from faithrag.methods.common import fit, generate, question_block, render_passages
from faithrag.methods.vanilla import answer_plain
from faithrag.retrieval.retriever import InMemoryRetriever
from faithrag.types import Question, Trace

PROMPTS = ("vanilla", "rationale_first", "answer_first")
ANSWER_FIRST = ("Reply in exactly this format:\nAnswer: {slot}\n"
                "Rationale: <one sentence: which passage says so>")


def answer_first_request(llm, question: Question, passages, max_tokens: int,
                         step) -> GenerationRequest:
    instruction = ANSWER_FIRST.format(slot=answer_slot(question))
    titles = [p.title for p in passages]

    def render(texts):
        user = (f"Passages:\n{render_passages(texts, titles)}\n\n{question_block(question)}\n\n"
                f"{instruction}")
        return (Message("system", DRAFT_SYSTEM), Message("user", user))

    fitted = fit(llm, render, passages, max_tokens, step)
    return GenerationRequest(fitted.messages, max_tokens=max_tokens, stop=DRAFT_STOP)


def answers(llm, config: Config, question: Question, passages, prompts: list[str],
            step) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for prompt in prompts:
        if prompt == "vanilla":
            answer = answer_plain(llm, question, passages, step,
                                  config.generation.answer_tokens)
            out[prompt] = {"answer": answer.text, "raw": answer.raw}
            continue
        tokens = config.cfrag.draft_tokens
        request = (draft_request(llm, question, passages, tokens, False, step,
                                 write_rationale=True)
                   if prompt == "rationale_first"
                   else answer_first_request(llm, question, passages, tokens, step))
        raw = generate(llm, [request], step)[0].text
        out[prompt] = {"answer": parse_hypothesis(raw).answer, "raw": raw}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="hotpotqa_distractor")
    parser.add_argument("--data-dir")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--prompts", default=",".join(PROMPTS))
    parser.add_argument("--model", default="default")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    prompts = args.prompts.split(",")
    unknown = set(prompts) - set(PROMPTS)
    if unknown:
        parser.error(f"unknown prompts: {', '.join(sorted(unknown))}")

    config = Config.load(None, {"llm.model": args.model, "llm.n_threads": args.threads})
    dataset = load_dataset(args.dataset, args.data_dir)
    items = dataset.items[: args.limit]
    out = Path(args.out)
    records = {}
    if out.exists():
        for line in out.read_text().splitlines():
            record = json.loads(line)
            records[record["id"]] = record
    llm = None
    for number, item in enumerate(items, 1):
        record = records.setdefault(item.id, {"id": item.id})
        todo = [p for p in prompts if p not in record]
        if not todo:
            continue
        llm = llm or load_llm(config.llm)
        question = Question(item.question, item.id)
        passages = InMemoryRetriever(item.passages(), mode=config.retrieval.mode).retrieve(
            question.text, args.k)
        start = time.perf_counter()
        with Trace().step("generate", "draft-prompt probe") as step:
            record.update(answers(llm, config, question, passages, todo, step))
        with out.open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"{number}/{len(items)} {item.id} {time.perf_counter() - start:.0f}s", flush=True)

    correct = {p: [bool(records[i.id][p]["answer"]) and smart_em(records[i.id][p]["answer"],
                                                                 i.answers) for i in items]
               for p in prompts}
    n = len(items)
    print(f"{args.dataset}, first {n} items, top {args.k} passages, model {args.model}")
    for prompt in prompts:
        line = f"{prompt:16s} {sum(correct[prompt]):3d} / {n}"
        if prompt != "vanilla" and "vanilla" in correct:
            only = sum(a and not b for a, b in zip(correct[prompt], correct["vanilla"]))
            only_vanilla = sum(b and not a for a, b in zip(correct[prompt], correct["vanilla"]))
            line += (f"   only this {only}, only vanilla {only_vanilla}, "
                     f"McNemar p = {mcnemar_exact_p(only, only_vanilla):.2f}")
        print(line)


if __name__ == "__main__":
    main()

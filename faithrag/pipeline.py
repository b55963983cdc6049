"""retrieve -> rerank -> generate -> verify -> detect, and `Pipeline.from_config`, the one way to
build it.

The steps after retrieval are the stage kinds of faithrag.registry.KINDS, run in their order by
one loop; every kind but the generator is optional. Stages plug in through the protocols in
faithrag.methods.base and are found by name in faithrag.registry.

Example:
    from faithrag import Pipeline

    pipeline = Pipeline.from_config(docs="docs/", kb="trusted/", verify="antisyco")
    result = pipeline.run("Who founded the company?")
    print(result.answer.text, [p.id for p in result.passages], result.trace.totals())
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faithrag import registry
from faithrag.config import Config, set_dotted
from faithrag.errors import ConfigError, InputError
from faithrag.llm.base import LLM, require_llm
from faithrag.methods.base import (
    Detector,
    Generator,
    RemovedPassage,
    Reranker,
    Retriever,
    Verifier,
)
from faithrag.methods.common import evidence_view
from faithrag.methods.conflicts import POLICIES, apply_on_conflict
from faithrag.types import (
    POLICY_KINDS,
    Answer,
    Conflict,
    ConflictCheck,
    EvidenceView,
    Passage,
    Question,
    Trace,
)

# Keyword settings of `Pipeline.from_config` that name a configuration key directly (one per
# stage kind, and these); any other keyword is `section__key` (e.g. csrag__alpha=-3 sets
# csrag.alpha).
SETTING_ALIASES = {
    **{entry.key: entry.config_key for entry in registry.KINDS},
    "on_conflict": "pipeline.on_conflict",
    "model": "llm.model",
    "backend": "llm.backend",
    "base_url": "llm.base_url",
    "k": "retrieval.k",
    "mode": "retrieval.mode",
}


@dataclass
class Result:
    """What a pipeline run returns. `passages` are the evidence handed to the generator, in
    order, and `evidence` what the generator saw of them (the passages its prompts held, those
    cut to fit and those left out, and why; None when no generator ran); `removed` the passages
    a re-ranker took out, each with its reason."""

    question: Question
    answer: Answer
    passages: list[Passage]
    removed: list[RemovedPassage] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)
    evidence: EvidenceView | None = None

    @property
    def conflicts(self) -> list[Conflict]:
        """Every conflict a stage met on the way to this answer, in the order they were met."""
        return self.trace.conflicts

    @property
    def conflict_checks(self) -> list[ConflictCheck]:
        """Every conflict check the stages made, including the ones that found nothing or could
        not tell."""
        return self.trace.checks

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data, the body of the server's `/v1/ask`: `passages` are
        the ones the generator saw (`evidence.seen`, as handed when no generator ran) and
        `evidence` says how many were dropped or cut, and why."""
        seen = self.passages if self.evidence is None else self.evidence.seen
        return {
            "question": self.question.text,
            "choices": self.question.choices,
            "answer": self.answer.text,
            "choice_index": self.answer.choice_index,
            "parse_status": self.answer.parse_status,
            "reason": self.answer.reason,
            "passages": [{"id": p.id, "title": p.title, "source": p.source, "score": p.score,
                          "text": p.text} for p in seen],
            "removed": [{"id": r.passage.id, "reason": r.reason, "text": r.passage.text}
                        for r in self.removed],
            "evidence": None if self.evidence is None else self.evidence.summary(),
            "conflicts": [asdict(c) for c in self.conflicts],
            # what the on_conflict policy did (None when it left the answer to the stages)
            "on_conflict": ({key: self.answer.meta[key] for key in
                             ("on_conflict", "conflicts", "resolved_answer")}
                            if "on_conflict" in self.answer.meta else None),
            "conflict_checks": [asdict(c) for c in self.conflict_checks],
            "trace": self.trace.to_dict(),
        }


def configure(config: Config | str | Path | None = None,
              overrides: Mapping[str, Any] | None = None, *, plain: bool = False,
              **settings: Any) -> Config:
    """A validated Config: `config` (a Config, a TOML path, or None for the defaults) with
    dotted `overrides` ({"csrag.alpha": -3}, None values skipped) and keyword `settings` applied
    (SETTING_ALIASES, other keywords as `section__key`; a stage kind's keyword given as None,
    `rerank=None`, runs no stage of that kind). `plain` applies registry.PLAIN_RAG (plain RAG)
    first, under `overrides` and `settings`. Unknown stage names, unknown keys and bad values
    raise ConfigError here, before anything loads; a given Config is not changed."""
    overrides = {**(registry.PLAIN_RAG if plain else {}), **(overrides or {}),
                 **{SETTING_ALIASES.get(key, key.replace("__", ".")):
                    registry.NONE if value is None and key in _OPTIONAL_KIND_KEYS else value
                    for key, value in settings.items()}}
    if isinstance(config, Config):
        data = config.model_dump()
        set_dotted(data, overrides)
        return Config.validated(data)
    return Config.load(config, overrides)


class Pipeline:
    """retrieve -> rerank -> generate -> verify -> detect over the stages given, then the
    `on_conflict` policy over the conflicts the stages reported (faithrag.methods.conflicts:
    "resolve" leaves the answer to the stages, "surface" gives each reading with its sources,
    "flag" keeps the answer and names the passages that disagree, "by_kind" flags where one
    side is an edited copy of another or a trusted source contradicted or confirmed the answer
    and surfaces the rest, "abstain" says the evidence conflicts; a context-vs-memory conflict
    alone changes nothing, since the context is trusted over the model's memory).

    Build it with `Pipeline.from_config`; the constructor takes ready stages (for tests and for
    stages built by hand), one per kind by the kind's name (`generator=`, `reranker=`, ...;
    registry.KINDS), and `stages` holds them by kind; `pipeline.reranker` etc. is the stage of
    that kind, None when the pipeline has none."""

    def __init__(self, generator: Generator, retriever: Retriever | None = None,
                 reranker: Reranker | None = None, verifier: Verifier | None = None, k: int = 5,
                 detector: Detector | None = None, on_conflict: str = "resolve",
                 **stages: Any):
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k}", "Set retrieval.k to a positive number.")
        given = {"generator": generator, "reranker": reranker, "verifier": verifier,
                 "detector": detector, **stages}
        unknown = sorted(set(given) - set(_KIND_NAMES))
        if unknown:
            raise ConfigError(f"Pipeline() got an unknown stage kind {unknown[0]!r}.",
                              f"Stage kinds: {', '.join(_KIND_NAMES)} (faithrag.registry.KINDS).")
        self.stages: dict[str, Any] = {
            entry.kind: require_stage(entry.kind, given.get(entry.kind))
            for entry in registry.KINDS if given.get(entry.kind) is not None or not entry.optional}
        if retriever is not None:
            require_retriever(retriever)
        if on_conflict not in POLICIES:
            raise ConfigError(f"Unknown on_conflict policy '{on_conflict}'.",
                              f"Choose one of: {', '.join(POLICIES)} (--on-conflict, or "
                              "pipeline.on_conflict in a config).")
        self.on_conflict = on_conflict
        self.retriever = retriever
        self.k = k

    def __getattr__(self, name: str) -> Any:
        """The stage of kind `name` (`pipeline.reranker`), None when the pipeline has none."""
        if name in _KIND_NAMES and "stages" in self.__dict__:
            return self.stages.get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def from_config(cls, config: Config | str | Path | None = None, *, llm: LLM | None = None,
                    docs: str | Path | None = None, index: str | Path | None = None,
                    passages: Sequence[Passage] | None = None,
                    retriever: Retriever | None = None, kb: str | Path | None = None,
                    plain: bool = False, **settings: Any) -> Pipeline:
        """The pipeline `config` describes.

        - `config`: a Config, a TOML file, or None for the defaults; `settings` override it
          (`method=`, `rerank=`, `verify=`, `detect=`, `on_conflict=`, `model=`, `backend=`,
          `base_url=`, `k=`, `mode=`, or any key as `section__key`, e.g. `csrag__alpha=-3`).
        - Evidence, at most one of: `docs` (a file or folder of .txt/.md/.jsonl, indexed in
          memory), `index` (a directory built by `faithrag index`, or `lancedb:URI`),
          `passages` (indexed in memory), `retriever` (anything with `retrieve(query, k)`).
          With none, questions are answered from the passages given to `run`.
        - The default pipeline answers (`vanilla`), reports the conflicts the evidence holds
          (`conflicts`), gives each reading with its sources where passages disagree, and
          names the passages that disagree instead where one is an edited copy of another
          (`on_conflict="by_kind"`). `plain=True` is plain RAG (registry.PLAIN_RAG:
          the generator alone); a stage keyword set to None (`detect=None`) runs none of
          its kind.
        - `kb`: a trusted knowledge base: sets antisyco.kb and, unless `verify` is given,
          verifies with antisyco against it.
        - `llm`: a loaded model (faithrag.load_llm, or faithrag.FakeLLM in tests); loaded from
          `config.llm` when not given.

        The configuration is validated and the evidence opened before the model loads, so a
        wrong name or path fails fast."""
        _check_arguments(config, llm, docs, index, passages, retriever, kb)
        if kb is not None:  # a trusted source given is a source to verify against
            settings["antisyco__kb"] = str(kb)
            settings.setdefault("verify", "antisyco")
        config = configure(config, plain=plain, **settings)
        check_stages(config)
        sources = [name for name, value in (("docs", docs), ("index", index),
                                            ("passages", passages), ("retriever", retriever))
                   if value is not None]
        if len(sources) > 1:
            raise ConfigError(f"Give one source of evidence, not {' and '.join(sources)}.",
                              "Pass one of docs=, index=, passages= or retriever=.")
        if llm is None and config.llm.backend == "llamacpp":
            from faithrag.llm.models import resolve_model
            resolve_model(config.llm.model)  # a missing model is named before the index loads
        if retriever is None:
            retriever = open_retriever(config, docs=docs, index=index, passages=passages)
        if llm is None:
            from faithrag.llm import load_llm
            llm = load_llm(config.llm)
        return cls.from_parts(config, llm, retriever)

    @classmethod
    def from_parts(cls, config: Config, llm: LLM, retriever: Retriever | None = None) -> Pipeline:
        """The stages `config.pipeline` names, around a loaded `llm` and an open `retriever`
        (ConfigError, before any stage is built, when either is not one)."""
        require_llm(llm)
        if retriever is not None:
            require_retriever(retriever)
        p = config.pipeline
        registry.check_conflict_policy(p.on_conflict, p.stages())  # type: ignore[arg-type]
        check_scoring = getattr(llm, "check_answer_scoring", None)
        if check_scoring is not None and registry.stage("generator", p.method).scores_options:
            check_scoring(p.method)  # a backend that cannot score exactly refuses here
        named = dict(p.stages())
        stages = {entry.kind: registry.stage(entry.kind, named[entry.kind]).build(
            llm, config, retriever) for entry in registry.KINDS if entry.kind in named}
        return cls(retriever=retriever, k=config.retrieval.k, on_conflict=p.on_conflict,
                   **stages)

    def run(self, question: Question | str, passages: Sequence[Passage] | None = None,
            trace: Trace | None = None, *, choices: Sequence[str] | None = None) -> Result:
        """Answer `question` from `passages` if given, else from the retriever (if any).

        `choices` makes it multiple choice (as does a Question with choices). The steps are
        recorded on `trace` (a new one by default), so a caller that passes its own keeps the
        steps that ran when a later one raises. An empty question raises InputError.

        When the re-ranker removes every passage and no verifier follows, the model is not
        asked to answer from its memory in their place: the generator and the detector do not
        run, and the answer says that the evidence was withheld (`WITHHELD`, with
        `meta["withheld"]` listing the removed passages). With a verifier the generator answers
        and the trusted knowledge base checks it."""
        question = make_question(question, choices)
        if passages is not None:
            passages = check_passages(passages)
        trace = Trace() if trace is None else trace
        if passages is None and self.retriever is not None:
            with trace.step("retrieve", type(self.retriever).__name__, query=question.text,
                            k=self.k) as step:
                passages = self.retriever.retrieve(question.text, self.k)
                step.outputs = {"passages": [(p.id, p.score) for p in passages]}
        passages = list(passages or [])
        removed: list[RemovedPassage] = []
        answer: Answer | None = None
        evidence: EvidenceView | None = None
        for entry in registry.run_order():
            stage = self.stages.get(entry.kind)
            if stage is None:
                continue
            if removed and not passages and "verifier" not in self.stages:
                if entry.kind == "generator":
                    answer, evidence = _withheld(question, stage.name, removed, trace)
                continue  # nothing is left to detect conflicts in
            call, first_step = getattr(stage, entry.call), len(trace.steps)
            out = (call(question, passages, answer, trace) if entry.reads_answer
                   else call(question, passages, trace))
            if entry.kind == "generator":  # what it saw, from the steps it added
                evidence = evidence_view(passages, trace.steps[first_step:])
            if entry.slot == "passages":
                passages, removed = out.passages, [*removed, *out.removed]
            elif entry.slot == "answer":
                answer = out
        assert answer is not None  # the generator, or the withheld answer in its place
        if self.on_conflict != "resolve":
            answer = self._apply_policy(question, answer, trace,
                                        [*passages, *(r.passage for r in removed)])
        return Result(question, answer, passages, removed, trace, evidence)

    def _apply_policy(self, question: Question, answer: Answer, trace: Trace,
                      passages: Sequence[Passage]) -> Answer:
        """The answer under `on_conflict`, recorded as a `policy/on_conflict` step."""
        with trace.step("policy", "on_conflict", policy=self.on_conflict) as step:
            conflicts = trace.conflicts
            final = apply_on_conflict(question, answer, conflicts, self.on_conflict, passages)
            acted = final.meta.get("conflicts", []) if final is not answer else []
            step.outputs = {"conflicts": acted, "answer": final.text}
            done: dict[str, list[str]] = {}  # action -> the kinds of the conflicts it took
            for i in acted:
                done.setdefault(conflicts[i].action, []).append(conflicts[i].kind)
            step.decision = (
                f"{final.meta['on_conflict']}: " + "; ".join(
                    f"{action} {len(kinds)} conflict(s) of {', '.join(sorted(set(kinds)))}"
                    for action, kinds in done.items()) if acted else
                f"no conflict of {', '.join(POLICY_KINDS)} reported: the answer stands")
            return final

    def rerank(self, question: Question | str, passages: Sequence[Passage],
               trace: Trace | None = None) -> Result:
        """Only the re-ranking stage over `passages`: the Result's `passages` are the kept ones
        in their new order, `removed` the ones taken out with their reasons; its answer is empty.
        ConfigError when the pipeline has no re-ranker (set rerank=)."""
        if self.reranker is None:
            raise ConfigError("This pipeline has no re-ranker.",
                              "Build it with rerank=, e.g. Pipeline.from_config(rerank='crossval').")
        question = make_question(question)
        trace = Trace() if trace is None else trace
        reranked = self.reranker.rerank(question, list(passages), trace)
        return Result(question, Answer(text=""), reranked.passages, reranked.removed, trace)

    def verify(self, question: Question | str, passages: Sequence[Passage],
               draft: Answer | str, trace: Trace | None = None) -> Result:
        """Only the verification stage: check `draft` (an answer written from `passages` by any
        generator) and return the verified answer; `answer.meta["decision"]` says what the
        verifier did where it records it. ConfigError when the pipeline has no verifier (set
        verify=)."""
        if self.verifier is None:
            raise ConfigError("This pipeline has no verifier.",
                              "Build it with verify=, e.g. Pipeline.from_config(verify='antisyco', kb=...).")
        question = make_question(question)
        draft = Answer(text=draft) if isinstance(draft, str) else draft
        if not draft.text.strip():
            raise InputError("The draft answer is empty.", "Pass the answer text to verify.")
        trace = Trace() if trace is None else trace
        passages = list(passages)
        answer = self.verifier.verify(question, passages, draft, trace)
        return Result(question, answer, passages, [], trace)


def check_stages(config: Config) -> None:
    """ConfigError when a stage `config` names lacks what it needs (a verifier's knowledge
    base), or when its on_conflict policy has no stage that reports conflicts; cheap, so
    callers run it before loading a model or an index."""
    for kind, name in config.pipeline.stages():
        registry.stage(kind, name).check(config)
    registry.check_conflict_policy(config.pipeline.on_conflict,
                                   config.pipeline.stages())  # type: ignore[arg-type]


def make_question(question: Question | str, choices: Sequence[str] | None = None) -> Question:
    """`question` as a Question with `choices`, checked: InputError for an empty question,
    fewer than two options or an empty option, or choices given twice."""
    if not isinstance(question, (str, Question)):
        raise InputError(f"The question must be a str or a Question, not "
                         f"{type(question).__name__}.", "Pass the question's text, e.g. "
                         "pipeline.run('Who founded X?').")
    if isinstance(question, str):
        question = Question(text=question.strip(), choices=list(choices) if choices else None)
    elif choices:
        raise InputError("Choices were given twice.",
                         "Pass choices= or a Question with choices, not both.")
    if not question.text.strip():
        raise InputError("The question is empty.", "Ask a question with some text.")
    if question.choices is not None and (len(question.choices) < 2 or not all(
            isinstance(c, str) and c.strip() for c in question.choices)):
        raise InputError("Choices must be at least two non-empty options.",
                         "Pass two or more options (--choices A B), or none for a free answer.")
    return question


WITHHELD = ("Withheld: the re-ranker removed every retrieved passage, and the model's memory "
            "alone is not evidence; the conflict report says why.")


def _withheld(question: Question, generator: str, removed: Sequence[RemovedPassage],
              trace: Trace) -> tuple[Answer, EvidenceView]:
    """The answer, and the evidence seen, when the re-ranker left no passage (see
    `Pipeline.run`): no model call, a `generate` step saying why."""
    ids = [r.passage.id for r in removed]
    with trace.step("generate", generator, question=question.text, passages=[]) as step:
        step.decision = ("not asked: the re-ranker removed every passage, and the model's "
                         "memory alone is no evidence; no conflict detection either")
        answer = Answer(WITHHELD, meta={"withheld": ids})
        step.outputs = {"answer": answer.text, "withheld": ids}
    return answer, EvidenceView(0, [], [], [], "")


_KIND_NAMES = tuple(entry.kind for entry in registry.KINDS)
_OPTIONAL_KIND_KEYS = frozenset(entry.key for entry in registry.KINDS if entry.optional)


def require_stage(kind: registry.Kind, value: Any) -> Any:
    """`value`, when it is a built stage of `kind` (it has that kind's call); else ConfigError
    naming the argument, whose hint for a stage's name given in its place is the keyword of
    `Pipeline.from_config` that builds it."""
    entry = registry.stage_kind(kind)
    call, keyword = entry.call, entry.key
    if callable(getattr(value, call, None)):
        return value
    if isinstance(value, str):
        hint = (f"The constructor takes built stages; build one by name with "
                f"Pipeline.from_config({keyword}={value!r}), or faithrag.registry.build("
                f"{kind!r}, {value!r}, llm, config).")
    else:
        hint = (f"Pass an object with {call}(...) (faithrag.methods.base.{kind.capitalize()}), "
                f"or build the pipeline with Pipeline.from_config({keyword}=NAME).")
    raise ConfigError(f"{kind} must be a built stage with {call}(...); the "
                      f"{type(value).__name__} given has none.", hint)


def require_retriever(value: Any) -> Retriever:
    """`value`, when it has retrieve(query, k); else ConfigError, whose hint for a path given
    in its place is the argument that opens one."""
    if callable(getattr(value, "retrieve", None)):
        return value
    hint = ("Pass an object with retrieve(query, k), or use docs=, index= or passages=" + (
        f" (index={value!r} opens an index, docs={value!r} a folder of documents)."
        if isinstance(value, (str, Path)) else "."))
    raise ConfigError(f"retriever must have retrieve(query, k); the {type(value).__name__} "
                      "given has not.", hint)


def check_passages(passages: Any) -> list[Passage]:
    """`passages` as a list, checked to be Passage objects: InputError otherwise (a string, a
    number, a list of strings)."""
    hint = ("Pass a list of faithrag.Passage, e.g. passages=[Passage(id='p1', text='...')]; "
            "for a folder of documents use docs=PATH.")
    if isinstance(passages, (str, bytes)) or not isinstance(passages, Sequence):
        raise InputError(f"passages must be a list of Passage, not {type(passages).__name__}.",
                         hint)
    wrong = next((i for i, p in enumerate(passages) if not isinstance(p, Passage)), None)
    if wrong is not None:
        raise InputError(f"passages must be a list of Passage; passages[{wrong}] is "
                         f"{type(passages[wrong]).__name__}.", hint)
    return list(passages)


def _check_arguments(config: Any, llm: Any, docs: Any, index: Any, passages: Any,
                     retriever: Any, kb: Any) -> None:
    """A TypeError-like mistake in `Pipeline.from_config`'s arguments as a FaithragError naming
    the argument, before anything loads."""
    if config is not None and not isinstance(config, (Config, str, Path)):
        raise ConfigError(f"config must be a Config, a TOML file path or None, not "
                          f"{type(config).__name__}.",
                          "For a dict of sections pass config=Config.validated(data); single "
                          "keys can be keywords, e.g. csrag__alpha=-3.")
    if llm is not None:
        require_llm(llm)
    if retriever is not None:
        require_retriever(retriever)
    for name, value in (("docs", docs), ("index", index), ("kb", kb)):
        if value is not None and not isinstance(value, (str, Path)):
            raise ConfigError(f"{name} must be a path (str or Path), not "
                              f"{type(value).__name__}.",
                              f"Pass {name}='path/to/...'" + (
                                  "; for passages in memory use passages=[Passage(...)]."
                                  if name == "docs" else "."))
    if passages is not None:
        check_passages(passages)


def open_retriever(config: Config, *, docs: str | Path | None = None,
                   index: str | Path | None = None,
                   passages: Sequence[Passage] | None = None) -> Retriever | None:
    """An on-disk index or LanceDB store, an in-memory index over a folder of documents or a
    list of passages, or None when no evidence is given."""
    from faithrag.retrieval import ChunkSettings, InMemoryRetriever, open_index
    from faithrag.retrieval.corpus import read_passages

    if index is not None:
        return open_index(index, use_cache=config.use_cache)
    if docs is not None:
        chunking = ChunkSettings(config.retrieval.chunk_tokens, config.retrieval.chunk_overlap)
        return InMemoryRetriever(read_passages(docs, chunking), mode=config.retrieval.mode,
                                 source=docs)
    if passages is not None:
        return InMemoryRetriever(list(passages), mode=config.retrieval.mode)
    return None


__all__ = ["SETTING_ALIASES", "Pipeline", "Result", "check_passages", "check_stages",
           "configure", "make_question", "open_retriever", "require_retriever", "require_stage"]

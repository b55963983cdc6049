"""Haystack components for faithrag's stages (extra `faithrag[haystack]`).

- `FaithragCrossValRanker`: the cross-validated re-ranker as a Haystack ranker. In: `query`,
  `documents`, optional `top_k` (10 by default, as Haystack's rankers). Out: `documents`
  (kept, in faithrag's order, each scored by rank in `Document.score`, where Haystack's model
  rankers write their score, and with `meta["faithrag_rank"]`), `removed_documents` (each
  with `meta["faithrag_removal_reason"]`) and `conflicts` (the conflict report, as dicts).
- `FaithragVerifier`: the anti-sycophancy verifier. In: `query`, `documents` and the
  generator's `replies` (strings or ChatMessages). Out: `answers` (one GeneratedAnswer, the
  verified answer, with faithrag's record in `meta["faithrag"]`), `decision` (PASS, REPAIR or
  FALLBACK) and `conflicts`.

Both take their model as `chat_generator=`, the app's Haystack chat generator (as Haystack's
`LLMRanker` takes it; run through `faithrag.integrations.chat_llm.ChatModelLLM`: text
generation only, so a setting whose stage scores options is refused when the component is
built), as `llm=` (a loaded faithrag LLM, shared by both components when given to both) or as
faithrag configuration: `config=` (a Config, a TOML path or a dict) and keyword
settings passed to `faithrag.Pipeline.from_config` (`model=`, `backend="openai"`,
`base_url=`, `section__key=`...), with `api_key=` a Haystack Secret for a server that wants a
token. The configuration is validated when the component is built; the model loads in
`warm_up()` (Haystack's Pipeline calls it; `run()` calls it when needed). Components built
from configuration or with a chat generator serialise with `to_dict`/`from_dict`; one given a
loaded `llm=` does not.

Documents follow Haystack's rankers: the ranker drops duplicates (same id) keeping the best
score and answers an empty list with empty outputs without loading the model (the verifier then
checks the draft against the knowledge base alone); a document whose content is None is refused
(as LostInTheMiddleRanker does), and one with blank text is left out of the evidence with a
warning. A document's id becomes the passage id, `meta["title"]` its title and
`meta["file_path"]` (or `meta["url"]`) its source; metadata of any type passes through untouched.
"""

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from faithrag.errors import ConfigError, InputError, MissingExtraError

try:
    from haystack import Document, component, default_from_dict, default_to_dict, logging
    from haystack.components.generators.chat.types import ChatGenerator
    from haystack.core.serialization import component_to_dict
    from haystack.dataclasses import ChatMessage, GeneratedAnswer
    from haystack.utils import (
        Secret,
        deserialize_chatgenerator_inplace,
        deserialize_secrets_inplace,
    )
except ImportError as exc:
    raise MissingExtraError("The Haystack adapter", "haystack",
                            f"Importing haystack failed: {exc}.") from exc

from faithrag.config import Config
from faithrag.integrations import rank_scores
from faithrag.integrations.chat_llm import ChatModelLLM, ChatReply, check_text_only
from faithrag.llm.base import LLM, Message, require_llm
from faithrag.pipeline import Pipeline, Result, check_stages, configure, make_question
from faithrag.types import Passage

logger = logging.getLogger(__name__)

RANK_KEY = "faithrag_rank"
REMOVAL_KEY = "faithrag_removal_reason"
BLANK_REASON = "no text: nothing to cross-validate"
ANSWER_KEY = "faithrag"


ROLES = {"system": ChatMessage.from_system, "user": ChatMessage.from_user,
         "assistant": ChatMessage.from_assistant}


def chat_generator_llm(generator: ChatGenerator) -> ChatModelLLM:
    """`generator` as a faithrag LLM: one `run(messages=...)` per request, its first reply's
    text, and the token counts of its `meta["usage"]` when it reports them."""
    def chat(messages: Sequence[Message]) -> ChatReply:
        replies = generator.run(messages=[ROLES[m.role](m.content) for m in messages])["replies"]
        if not replies:
            return ChatReply("")
        usage = replies[0].meta.get("usage") or {}
        return ChatReply(replies[0].text or "", usage.get("prompt_tokens"),
                         usage.get("completion_tokens"))
    model = getattr(generator, "model", None)
    return ChatModelLLM(":".join(["haystack", type(generator).__name__,
                                  *([str(model)] if model else [])]), chat)


class _Stage:
    """What both components hold: the configuration, validated at construction, and the
    faithrag pipeline that runs the stage, built on warm_up()."""

    def __init__(self, component_name: str, stage: dict[str, Any],
                 config: Config | str | Path | dict[str, Any] | None, llm: LLM | None,
                 chat_generator: ChatGenerator | None, api_key: Secret | None,
                 settings: dict[str, Any]):
        if llm is not None and chat_generator is not None:
            raise ConfigError(f"{component_name} got both llm= and chat_generator=.",
                              "Pass one model: chat_generator= (your Haystack chat generator) "
                              "or llm= (a faithrag model).")
        self._component_name = component_name
        self._config_source = config
        self._llm = None if llm is None else require_llm(llm)  # a name is refused here
        self.chat_generator = chat_generator
        self.api_key = api_key
        self.settings = settings
        if isinstance(config, dict):
            config = Config.validated(config)
        self._config = configure(config, **stage, **settings)
        check_stages(self._config)  # a missing knowledge base is named before any model loads
        if chat_generator is not None:
            check_text_only(self._config, component_name)
        self._pipeline: Pipeline | None = None

    def warm_up(self) -> None:
        """Load the model (unless one was given as `llm=`), or warm up the chat generator, and
        build the stage; once."""
        if self._pipeline is None:
            llm = self._llm
            if self.chat_generator is not None:
                if hasattr(self.chat_generator, "warm_up"):
                    self.chat_generator.warm_up()
                llm = chat_generator_llm(self.chat_generator)
            key = {} if self.api_key is None else {"llm__api_key": self.api_key.resolve_value()}
            self._pipeline = Pipeline.from_config(self._config, llm=llm, **key)

    @property
    def pipeline(self) -> Pipeline:
        """The faithrag pipeline, built on first use."""
        self.warm_up()
        return self._pipeline

    def serialised(self, owner: Any, **init_parameters: Any) -> dict[str, Any]:
        """`owner` as Haystack's dictionary: its configuration and `init_parameters`."""
        if self._llm is not None:
            raise ConfigError(f"A {self._component_name} built with a loaded llm= cannot be "
                              "serialised.",
                              f"Build it from settings to serialise it, e.g. "
                              f"{self._component_name}(model='default') or "
                              f"{self._component_name}(backend='openai', base_url=...).")
        config = self._config_source
        if isinstance(config, Config):
            config = config.model_dump(mode="json")
        if "llm__api_key" in self.settings or (isinstance(config, dict)
                                               and config.get("llm", {}).get("api_key")):
            raise ConfigError(f"Serialising this {self._component_name} would write its API key "
                              "in plain text.",
                              "Pass the key as api_key=Secret.from_env_var('NAME') instead.")
        generator = ({} if self.chat_generator is None else {"chat_generator": component_to_dict(
            obj=self.chat_generator, name="chat_generator")})
        return default_to_dict(owner, config=str(config) if isinstance(config, Path) else config,
                               api_key=None if self.api_key is None else self.api_key.to_dict(),
                               **generator, **init_parameters, **self.settings)


def _from_dict(cls: type, data: dict[str, Any]) -> Any:
    """The component of `cls` that `to_dict` described: its secret and chat generator
    restored."""
    deserialize_secrets_inplace(data["init_parameters"], keys=["api_key"])
    if data["init_parameters"].get("chat_generator"):
        deserialize_chatgenerator_inplace(data["init_parameters"], key="chat_generator")
    return default_from_dict(cls, data)


def _text_documents(documents: list[Document], component_name: str
                    ) -> tuple[list[Document], list[Document]]:
    """(documents with text, documents with blank text); InputError for content None."""
    no_content = [d.id for d in documents if d.content is None]
    if no_content:
        raise InputError(f"{component_name} can process only text, but documents "
                         f"{', '.join(no_content)} have no content.",
                         "Route them around it, e.g. with haystack's "
                         "DocumentLengthRouter(threshold=0) in front of it.")
    blank = [d for d in documents if not d.content.strip()]
    if blank:
        logger.warning("{component} leaves out documents with blank text: {ids}",
                       component=component_name, ids=", ".join(d.id for d in blank))
    return [d for d in documents if d.content.strip()], blank


def _deduplicated(documents: list[Document]) -> list[Document]:
    """One document per id, the best scored (a missing score counts as lowest), in first-seen
    order, as Haystack's rankers deduplicate."""
    best: dict[str, Document] = {}
    for doc in documents:
        kept = best.get(doc.id)
        if kept is None or (doc.score is not None and (kept.score is None
                                                       or doc.score > kept.score)):
            best[doc.id] = doc
    return list(best.values())


def _passage(doc: Document) -> Passage:
    meta = doc.meta or {}
    title = meta.get("title")
    source = meta.get("file_path") or meta.get("url")
    return Passage(id=doc.id, text=doc.content or "", title="" if title is None else str(title),
                   source="" if source is None else str(source), score=doc.score)


def _with_meta(doc: Document, **meta: Any) -> Document:
    return dataclasses.replace(doc, meta={**(doc.meta or {}), **meta})


def _conflicts(result: Result) -> list[dict[str, Any]]:
    return [dataclasses.asdict(c) for c in result.conflicts]


def _check_top_k(top_k: int | None) -> None:
    if top_k is not None and top_k <= 0:
        raise ConfigError(f"top_k must be > 0, got {top_k}.",
                          "Pass top_k=None to keep every document, or a positive number.")


@component
class FaithragCrossValRanker:
    """faithrag's cross-validated re-ranker (`rerank="crossval"`) as a Haystack ranker: it
    removes the false side of each conflicting pair of documents, then ranks the rest.

    `run(query, documents, top_k=None)` returns:
    - `documents`: the kept documents, best first, at most `top_k` (default: the one given at
      construction, 10 unless set, as Haystack's rankers; None there keeps all); each is the
      input Document (id, content, embedding and metadata unchanged) with `score` set to its
      rank score (faithrag.integrations.rank_scores: 1.0 for the first, descending, as a model
      ranker's score sorts them, so a joiner or sampler after it keeps this order) and
      `meta["faithrag_rank"]` (1 = first) added.
    - `removed_documents`: the documents taken out, each with `meta["faithrag_removal_reason"]`
      (the document it conflicted with and the verdict; or that it had no text).
    - `conflicts`: the conflicts the stage reported (`faithrag.Conflict` as dicts).

    Construction: `chat_generator=` the app's Haystack chat generator, `llm=` a loaded
    faithrag LLM, or `config=` and keyword settings for
    `faithrag.Pipeline.from_config` (e.g. `model="default"`, `backend="openai",
    base_url="http://127.0.0.1:8080/v1"`, `rerank__verdict="support"`); `api_key=` a Secret for
    the server's token. The model loads in `warm_up()`. Bad settings raise ConfigError here.

    Example:
    ```python
    from haystack import Document
    from faithrag import FakeLLM
    from faithrag.integrations.haystack import FaithragCrossValRanker

    ranker = FaithragCrossValRanker(llm=FakeLLM(default="Conflict: None"))
    docs = [Document(content="The bridge opened in 1887."),
            Document(content="The bridge opened in 1921.")]
    result = ranker.run(query="When did the bridge open?", documents=docs)
    print([d.meta["faithrag_rank"] for d in result["documents"]], result["removed_documents"])
    ```
    """

    def __init__(self, config: Config | str | Path | dict[str, Any] | None = None, *,
                 chat_generator: ChatGenerator | None = None, llm: LLM | None = None,
                 api_key: Secret | None = None, top_k: int | None = 10, **settings: Any):
        _check_top_k(top_k)
        self.top_k = top_k
        self._stage = _Stage("FaithragCrossValRanker", {"rerank": "crossval", "verify": None},
                             config, llm, chat_generator, api_key, settings)

    def warm_up(self) -> None:
        """Load the model (unless one was given as `llm=`) and build the stage; once."""
        self._stage.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """The component as a dictionary (Haystack's pipeline serialisation). ConfigError when
        it was given a loaded `llm=` or a plain-text API key."""
        return self._stage.serialised(self, top_k=self.top_k)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FaithragCrossValRanker":
        """The component `to_dict` described."""
        return _from_dict(cls, data)

    @component.output_types(documents=list[Document], removed_documents=list[Document],
                            conflicts=list[dict[str, Any]])
    def run(self, query: str, documents: list[Document],
            top_k: int | None = None) -> dict[str, Any]:
        """Cross-validate and re-rank `documents` for `query` (see the class docstring).
        InputError for an empty query or a document without content; ConfigError for a
        `top_k` below 1."""
        _check_top_k(top_k)
        top_k = self.top_k if top_k is None else top_k
        if not documents:
            return {"documents": [], "removed_documents": [], "conflicts": []}
        question = make_question(query)
        textual, blank = _text_documents(_deduplicated(documents), "FaithragCrossValRanker")
        removed = [_with_meta(d, **{REMOVAL_KEY: BLANK_REASON}) for d in blank]
        if not textual:
            return {"documents": [], "removed_documents": removed, "conflicts": []}
        result = self._stage.pipeline.rerank(question, [_passage(d) for d in textual])
        by_id = {d.id: d for d in textual}
        scores = rank_scores(len(result.passages))
        kept = [dataclasses.replace(_with_meta(by_id[p.id], **{RANK_KEY: rank}), score=score)
                for rank, (p, score) in enumerate(zip(result.passages, scores), 1)]
        removed = [_with_meta(by_id[r.passage.id], **{REMOVAL_KEY: r.reason})
                   for r in result.removed] + removed
        return {"documents": kept[:top_k] if top_k else kept, "removed_documents": removed,
                "conflicts": _conflicts(result)}


@component
class FaithragVerifier:
    """faithrag's anti-sycophancy verifier (`verify="antisyco"`) as a Haystack component: it
    checks a generator's draft against the retrieved documents and a trusted knowledge base,
    and passes it, repairs it from the knowledge base, or falls back to the model's own answer.

    `run(query, documents, replies)` verifies the first reply (a string or a ChatMessage, as
    Haystack generators emit them) and returns:
    - `answers`: one GeneratedAnswer: `data` the verified answer, `documents` the documents
      with text, `meta` the reply's metadata plus `meta["faithrag"]`: the decision, its
      reasons, the draft, the judgements and claims, and the conflicts.
    - `decision`: "PASS", "REPAIR" or "FALLBACK".
    - `conflicts`: the conflicts the stage reported (`faithrag.Conflict` as dicts).

    Construction: `kb=` the trusted knowledge base (a folder or file of documents, or an index
    built by `faithrag index`), required unless the config sets `antisyco.kb`; the model as for
    FaithragCrossValRanker (`chat_generator=`, `llm=`, or `config=` and keyword settings,
    `api_key=`).

    Example:
    ```python
    from haystack import Document
    from faithrag import FakeLLM
    from faithrag.integrations.haystack import FaithragVerifier

    verifier = FaithragVerifier(kb="trusted/", llm=FakeLLM(default="1889"))
    result = verifier.run(query="When was the Eiffel Tower completed?",
                          documents=[Document(content="It was completed in 1925.")],
                          replies=["1925"])
    print(result["decision"], result["answers"][0].data)
    ```
    """

    def __init__(self, kb: str | Path | None = None,
                 config: Config | str | Path | dict[str, Any] | None = None, *,
                 chat_generator: ChatGenerator | None = None, llm: LLM | None = None,
                 api_key: Secret | None = None, **settings: Any):
        self.kb = None if kb is None else str(kb)
        stage = {"verify": "antisyco", "rerank": None,
                 **({} if kb is None else {"antisyco__kb": self.kb})}
        self._stage = _Stage("FaithragVerifier", stage, config, llm, chat_generator, api_key,
                             settings)

    def warm_up(self) -> None:
        """Load the model (unless one was given as `llm=`) and build the stage; once."""
        self._stage.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """The component as a dictionary (Haystack's pipeline serialisation). ConfigError when
        it was given a loaded `llm=` or a plain-text API key."""
        return self._stage.serialised(self, kb=self.kb)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FaithragVerifier":
        """The component `to_dict` described."""
        return _from_dict(cls, data)

    @component.output_types(answers=list[GeneratedAnswer], decision=str,
                            conflicts=list[dict[str, Any]])
    def run(self, query: str, documents: list[Document],
            replies: list[str] | list[ChatMessage]) -> dict[str, Any]:
        """Verify the first of `replies` for `query` against `documents` and the knowledge base
        (see the class docstring). InputError for an empty query, no reply, a reply without
        text, or a document without content."""
        question = make_question(query)
        if not replies:
            raise InputError("FaithragVerifier got no reply to verify.",
                             "Connect a generator's replies to it, or pass replies=[draft].")
        if len(replies) > 1:
            logger.warning("FaithragVerifier verifies the first of {n} replies.", n=len(replies))
        reply = replies[0]
        draft = (reply.text or "") if isinstance(reply, ChatMessage) else str(reply)
        if not draft.strip():
            raise InputError("The reply to verify has no text.",
                             "Pass the generator's answer as replies=[draft].")
        textual, _ = _text_documents(list(documents), "FaithragVerifier")
        result = self._stage.pipeline.verify(question, [_passage(d) for d in textual], draft)
        conflicts = _conflicts(result)
        reply_meta = dict(reply.meta) if isinstance(reply, ChatMessage) else {}
        answer = GeneratedAnswer(data=result.answer.text, query=query, documents=textual,
                                 meta={**reply_meta, ANSWER_KEY: {**result.answer.meta,
                                                                  "conflicts": conflicts}})
        return {"answers": [answer], "decision": result.answer.meta["decision"],
                "conflicts": conflicts}


__all__ = ["FaithragCrossValRanker", "FaithragVerifier", "chat_generator_llm"]

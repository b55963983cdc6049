"""faithrag's stages as LangChain components (extra `langchain`: `pip install 'faithrag[langchain]'`).

- `FaithragReranker`: the cross-validated re-ranker as a document compressor
  (`langchain_core.documents.BaseDocumentCompressor`), as LangChain's re-rankers are
  (`CrossEncoderReranker`, `FlashrankRerank`, `CohereRerank`). It removes the false side of a
  conflict between the retrieved documents and orders the rest; use it on its own
  (`compress_documents(documents, query)`) or as the `base_compressor` of
  `langchain_classic.retrievers.ContextualCompressionRetriever`.
- `FaithragVerifier`: the anti-sycophancy verifier as a Runnable
  (`langchain_core.runnables.RunnableSerializable`). It takes the dict an LCEL RAG chain holds
  at its end, `{"question", "documents", "answer"}`, checks the draft answer against a trusted
  knowledge base and returns the verified answer with its decision and the conflicts met.

Both take the model as `llm=`: the app's own LangChain chat model (a `BaseChatModel`, run
through `faithrag.integrations.chat_llm.ChatModelLLM`: text generation only, so a setting whose
stage scores options is refused when the component is built), a loaded faithrag LLM
(`faithrag.load_llm(...)`, or `faithrag.FakeLLM` in tests), or none: then the model is loaded
on first use from `config=` (a `faithrag.Config` or a TOML path) and `settings=` (the keyword
settings of `faithrag.Pipeline.from_config`, e.g. `{"backend": "openai", "base_url":
"http://127.0.0.1:8080/v1", "model": "qwen"}` for an OpenAI-compatible server). The
configuration is validated when the component is built, before any model loads. A document is
handed to faithrag as a `Passage` whose id is `Document.id` (`doc-<position>` when it has none;
made unique), whose title is `metadata["title"]` and source `metadata["source"]`; documents
whose `page_content` is blank carry no evidence and are left out. Retrieved text is data, never
instructions, as in every faithrag stage.

Example:
    from langchain_core.documents import Document
    from faithrag import FakeLLM
    from faithrag.integrations.langchain import FaithragReranker, FaithragVerifier

    reranker = FaithragReranker(llm=FakeLLM(default="Conflict: None"))
    kept = reranker.compress_documents([Document("Paris is in France.", id="p")], "Where is Paris?")
    verifier = FaithragVerifier(llm=FakeLLM(default="ANSWER: France"), kb="trusted/")
    out = verifier.invoke({"question": "Where is Paris?", "documents": kept, "answer": "France"})
    print(out["answer"], out["decision"], out["conflicts"])
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict
from os import PathLike
from typing import Any

from faithrag.config import Config
from faithrag.errors import ConfigError, InputError, MissingExtraError
from faithrag.integrations import rank_scores, unique_id
from faithrag.integrations.chat_llm import ChatModelLLM, ChatReply, check_text_only
from faithrag.llm.base import Message, require_llm
from faithrag.pipeline import Pipeline, check_stages, configure
from faithrag.types import Passage

try:
    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    from langchain_core.runnables import RunnableConfig, RunnableSerializable
    from pydantic import ConfigDict, Field, PrivateAttr, field_validator
except ImportError as exc:
    raise MissingExtraError("The LangChain adapter", "langchain",
                            f"Importing langchain-core failed: {exc}.") from exc

RANK_KEY = "faithrag_rank"
SCORE_KEY = "relevance_score"  # where LangChain's re-rankers (FlashrankRerank, CohereRerank) write
REMOVED_KEY = "faithrag_removed"
CONFLICTS_KEY = "faithrag_conflicts"
NO_TEXT = "no text: the document's page_content is blank"
VERIFIER_INPUT = ("Invoke it with {'question': str, 'documents': [Document, ...], "
                  "'answer': str or a chat message}.")


ROLES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def chat_model_llm(model: BaseChatModel) -> ChatModelLLM:
    """`model` as a faithrag LLM: one `invoke` per request, its `usage_metadata` as the token
    counts when it reports them."""
    def chat(messages: Sequence[Message]) -> ChatReply:
        reply = model.invoke([ROLES[m.role](content=m.content) for m in messages])
        usage = reply.usage_metadata or {}
        return ChatReply(reply.text, usage.get("input_tokens"), usage.get("output_tokens"))
    model_name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return ChatModelLLM(":".join(["langchain", type(model).__name__,
                                  *([str(model_name)] if model_name else [])]), chat)


class _LazyPipeline:
    """A faithrag Pipeline built on first use (once, also under concurrent calls) from a
    validated configuration and an optional loaded LLM."""

    def __init__(self, config: Config, llm: Any):
        self.config = config
        self.llm = None if llm is None else require_llm(llm)  # a name is refused here
        self._pipeline: Pipeline | None = None
        self._lock = threading.Lock()

    def get(self) -> Pipeline:
        with self._lock:
            if self._pipeline is None:
                self._pipeline = Pipeline.from_config(self.config, llm=self.llm)
            return self._pipeline


def _path_as_text(value: Any) -> Any:
    return str(value) if isinstance(value, PathLike) else value


def _lazy_pipeline(component: str, llm: Any, config: Config | str | None,
                   settings: dict[str, Any], **fields: Any) -> _LazyPipeline:
    """The pipeline of a component: `config` with `settings` and the component's own `fields`
    (its stage, its knowledge base) applied and checked, around `llm` (a LangChain chat model
    is wrapped, and a setting it cannot run refused). ConfigError when `settings` also sets one
    of those fields."""
    for name in fields:
        if name in settings:
            raise ConfigError(f"'{name}' is set by the component, not in settings.",
                              f"Pass it as the component's own field: {name}=...")
    resolved = configure(config, **settings, **fields)
    check_stages(resolved)
    if isinstance(llm, BaseChatModel):
        check_text_only(resolved, component)
        llm = chat_model_llm(llm)
    return _LazyPipeline(resolved, llm)


def to_passages(documents: Sequence[Document]) -> tuple[list[Passage], dict[str, Document],
                                                        list[Document]]:
    """The documents with text as passages in their order, each passage id's document, and the
    documents without text. Passage ids are `Document.id`, or `doc-<position>` when it is unset,
    with `~2`, `~3`, ... added to repeats. InputError when an item is not a Document."""
    passages: list[Passage] = []
    by_id: dict[str, Document] = {}
    blank: list[Document] = []
    for position, document in enumerate(documents):
        if not isinstance(document, Document):
            raise InputError(f"Item {position} of the documents is a {type(document).__name__}, "
                             "not a langchain_core.documents.Document.",
                             "Pass the Documents a LangChain retriever returns.")
        if not document.page_content.strip():
            blank.append(document)
            continue
        base = document.id or f"doc-{position}"
        passage_id = unique_id(base, by_id, "~")
        by_id[passage_id] = document
        metadata = document.metadata
        passages.append(Passage(passage_id, document.page_content,
                                title=str(metadata.get("title") or ""),
                                source=str(metadata.get("source") or "")))
    return passages, by_id, blank


class FaithragReranker(BaseDocumentCompressor):
    """The cross-validated re-ranker as a LangChain document compressor.

    `compress_documents(documents, query)` returns the documents that are kept, best first, at
    most `top_n` (3 by default, as LangChain's re-rankers; None: all): copies of the input
    Documents (same class, `id`, `page_content` and metadata) with
    `metadata["relevance_score"]`, where LangChain's re-rankers write their score (the rank
    score of faithrag.integrations.rank_scores: 1.0 for the first kept document, descending),
    and `metadata["faithrag_rank"]` (1 = best) added. Removed documents are dropped; every kept
    document carries `metadata["faithrag_removed"]`, the list of `{"id", "reason"}` of the
    documents taken out (documents with a blank `page_content` are among them, reason "no
    text"), and `metadata["faithrag_conflicts"]`, the conflict report (faithrag `Conflict`s as
    dicts). No documents in, no documents out, and no model loaded. An empty query raises
    faithrag.InputError.

    Fields: `llm` (a LangChain chat model or a loaded faithrag LLM; not serialised), `config`
    (a faithrag Config or TOML path), `settings` (keyword settings of Pipeline.from_config),
    `rerank` (the registered re-ranker, "crossval"), `top_n`. The model loads on the first call
    when `llm` is not given. `model_dump()` gives the fields but `llm`;
    `FaithragReranker(**dumped, llm=...)` rebuilds it.

    Example:
        reranker = FaithragReranker(llm=chat_model, top_n=3)  # the app's BaseChatModel
        retriever = ContextualCompressionRetriever(base_compressor=reranker,
                                                   base_retriever=bm25_retriever)
    """

    llm: Any = Field(default=None, exclude=True)
    """a LangChain chat model or a loaded faithrag LLM; when None, a faithrag model is loaded
    from `config` and `settings` on first use"""
    config: Config | str | None = None
    """a faithrag Config or the path of a TOML configuration; None: the defaults"""
    settings: dict[str, Any] = Field(default_factory=dict)
    """keyword settings of faithrag.Pipeline.from_config (`backend`, `base_url`, `model`,
    `section__key`, ...)"""
    rerank: str = "crossval"
    """the registered re-ranker to run"""
    top_n: int | None = Field(default=3, ge=1)
    """how many of the kept documents to return; None: all"""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    _pipeline: _LazyPipeline = PrivateAttr()

    @field_validator("config", mode="before")
    @classmethod
    def _config_path(cls, value: Any) -> Any:
        return _path_as_text(value)

    def model_post_init(self, context: Any) -> None:
        self._pipeline = _lazy_pipeline("FaithragReranker", self.llm, self.config, self.settings,
                                        rerank=self.rerank)

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        """The kept documents, best first, with faithrag's rank, the removed documents and the
        conflicts in their metadata (see the class docstring)."""
        if not documents:
            return []
        passages, by_id, blank = to_passages(documents)
        removed = [{"id": document.id, "reason": NO_TEXT} for document in blank]
        if not passages:
            return []
        result = self._pipeline.get().rerank(query, passages)
        removed = [{"id": r.passage.id, "reason": r.reason} for r in result.removed] + removed
        conflicts = [asdict(conflict) for conflict in result.conflicts]
        scored = list(zip(result.passages, rank_scores(len(result.passages))))
        return [by_id[passage.id].model_copy(update={"metadata": {
                    **by_id[passage.id].metadata, SCORE_KEY: score, RANK_KEY: rank,
                    REMOVED_KEY: [dict(r) for r in removed],
                    CONFLICTS_KEY: [dict(c) for c in conflicts]}})
                for rank, (passage, score) in enumerate(scored[: self.top_n], 1)]


class FaithragVerifier(RunnableSerializable[dict[str, Any], dict[str, Any]]):
    """The anti-sycophancy verifier as a LangChain Runnable.

    Input: `{"question": str, "documents": [Document, ...], "answer": str or a chat message}`
    (the draft answer an LCEL RAG chain produced from those documents; other keys are kept).
    Output: the input with `"answer"` replaced by the verified answer (a str) and
    `"draft"` (the answer given), `"decision"` (PASS, REPAIR or FALLBACK), `"conflicts"` (faithrag
    `Conflict`s as dicts) and `"verification"` (everything the verifier recorded: reasons,
    relevance, support, the claims checked) added. A missing key, a non-Document item or an
    empty question or draft raises faithrag.InputError; documents with a blank `page_content`
    are not shown to the verifier.

    Fields: `kb` (the trusted knowledge base: an index directory, or a file or folder of
    .txt/.md/.jsonl documents; required), `llm` (a LangChain chat model or a loaded faithrag
    LLM; not serialised),
    `config`, `settings`, `verify` (the registered verifier, "antisyco"). The model and the
    knowledge base load on the first call when `llm` is not given. It serialises with
    `langchain_core.load.dumps` (without `llm`) and loads back with
    `loads(text, valid_namespaces=["faithrag"], allowed_objects=[FaithragVerifier])`.

    Example:
        chain = RunnablePassthrough.assign(answer=prompt | chat_model | StrOutputParser())
        rag = chain | FaithragVerifier(kb="trusted/", llm=chat_model)
        rag.invoke({"question": question, "documents": retriever.invoke(question)})
    """

    kb: str | None = None
    """the trusted knowledge base (sets antisyco.kb)"""
    llm: Any = Field(default=None, exclude=True)
    """a LangChain chat model or a loaded faithrag LLM; when None, a faithrag model is loaded
    from `config` and `settings` on first use"""
    config: Config | str | None = None
    """a faithrag Config or the path of a TOML configuration; None: the defaults"""
    settings: dict[str, Any] = Field(default_factory=dict)
    """keyword settings of faithrag.Pipeline.from_config"""
    verify: str = "antisyco"
    """the registered verifier to run"""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    _pipeline: _LazyPipeline = PrivateAttr()

    @field_validator("kb", "config", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return _path_as_text(value)

    def model_post_init(self, context: Any) -> None:
        kb = {"antisyco__kb": self.kb} if self.kb is not None else {}
        self._pipeline = _lazy_pipeline("FaithragVerifier", self.llm, self.config, self.settings,
                                        verify=self.verify, **kb)

    @classmethod
    def is_lc_serializable(cls) -> bool:
        return True

    def invoke(self, input: dict[str, Any], config: RunnableConfig | None = None,
               **kwargs: Any) -> dict[str, Any]:
        """The input with the verified answer and its decision (see the class docstring)."""
        return self._call_with_config(self._verify, input, config, run_type="chain")

    def _verify(self, chain_input: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(chain_input, dict):
            raise InputError(f"The verifier takes a dict, not a {type(chain_input).__name__}.",
                             VERIFIER_INPUT)
        missing = [key for key in ("question", "documents", "answer") if key not in chain_input]
        if missing:
            raise InputError(f"The verifier's input lacks {', '.join(map(repr, missing))}.",
                             VERIFIER_INPUT)
        question = chain_input["question"]
        if not isinstance(question, str):
            raise InputError(f"The question is a {type(question).__name__}, not text.",
                             VERIFIER_INPUT)
        draft = chain_input["answer"]
        draft = draft.text if isinstance(draft, BaseMessage) else draft
        if not isinstance(draft, str):
            raise InputError(f"The answer is a {type(draft).__name__}, not text.",
                             VERIFIER_INPUT)
        documents = chain_input["documents"]
        if isinstance(documents, (str, Document)) or not isinstance(documents, Sequence):
            raise InputError("The documents must be a list of Documents.", VERIFIER_INPUT)
        passages, _, _ = to_passages(documents)
        result = self._pipeline.get().verify(question, passages, draft)
        meta = dict(result.answer.meta)
        return {**chain_input, "answer": result.answer.text, "draft": draft,
                "decision": meta.get("decision"),
                "conflicts": [asdict(conflict) for conflict in result.conflicts],
                "verification": meta}


__all__ = ["CONFLICTS_KEY", "RANK_KEY", "REMOVED_KEY", "SCORE_KEY", "FaithragReranker",
           "FaithragVerifier", "chat_model_llm", "to_passages"]

"""faithrag inside LlamaIndex: the cross-validated re-ranker as a node post-processor, and the
anti-sycophancy verifier as a step from a query engine's `Response` to a verified one.

- `FaithragCrossValRerank` (a `BaseNodePostprocessor`, named and used as LlamaIndex's
  re-rankers `LLMRerank`, `RankGPTRerank`, `SentenceTransformerRerank` are): takes the
  retrieved `NodeWithScore`s and the query, removes the false side of each conflict it finds,
  re-orders the rest and returns the first `top_n` (5, as `RankGPTRerank`, the listwise LLM
  re-ranker it follows). Kept nodes are copies of the incoming ones (same `node_id`, text and
  metadata) whose `score` is the rank score (faithrag.integrations.rank_scores: 1.0 first,
  descending, as a re-ranker's score sorts them), the retrieval score kept in
  `metadata["retrieval_score"]` with `keep_retrieval_score=True` (as `SentenceTransformerRerank`
  keeps it), and whose metadata gains `faithrag_rank` (1 = first), `faithrag_removed`
  ([{"node_id", "reason"}] for every node this call removed) and `faithrag_conflicts` (the
  conflict report, one dict per `faithrag.Conflict`). Removed nodes are dropped, as
  LlamaIndex's own post-processors drop nodes. faithrag's keys are excluded from the LLM's and
  the embedding's view of the node, so a query engine never puts them in a prompt.
- `FaithragVerifier`: `verify(query, response)` checks the draft in a `Response` (or a string,
  with the nodes it was written from) against the retrieved nodes and a trusted knowledge base,
  and returns a new `Response`: the verified answer, the same source nodes, and
  `metadata["faithrag"]` with the decision (PASS, REPAIR or FALLBACK), its reasons, the draft
  and the conflict report. It is a step after the query engine rather than a post-processor
  because it needs the answer, which only exists once the engine has synthesised it.

Both are LlamaIndex components (pydantic models with `to_dict`/`from_dict`). The model is
`llm=`: the app's LlamaIndex `LLM` (as `LLMRerank(llm=...)` takes it; run through
`faithrag.integrations.chat_llm.ChatModelLLM`, its window `llm.metadata.context_window`: text
generation only, so a setting whose stage scores options is refused when the component is
built), or a loaded faithrag model (`faithrag.load_llm(...)`, shared by both); without it,
faithrag's configuration names the model: `config` (a `faithrag.Config`, a TOML path or the
dict `to_dict` wrote) and keyword settings as `Pipeline.from_config` takes them (e.g.
`backend="openai", base_url=..., model=...` for an OpenAI-compatible server), loaded at
construction, as LlamaIndex's own re-rankers load theirs. `to_dict` keeps the configuration
(without `llm.api_key`), never a model: `from_dict(data, llm=...)` passes one again,
otherwise the configured model is loaded.

Node text is `node.get_content(MetadataMode.NONE)` (a node without text is an empty passage, as
LlamaIndex's re-rankers score it); the passage id is the `node_id` (made unique, or
`node-<position>` when empty); the title comes from the metadata keys `title` or
`document_title`, the source from `file_path`, `url` or `source`, whatever their value types.

Example:
    from llama_index.core import Settings, SimpleDirectoryReader, SimpleKeywordTableIndex
    from faithrag.integrations.llamaindex import FaithragCrossValRerank, FaithragVerifier

    index = SimpleKeywordTableIndex.from_documents(SimpleDirectoryReader("docs/").load_data())
    engine = index.as_query_engine(
        node_postprocessors=[FaithragCrossValRerank(llm=Settings.llm, top_n=3)])
    response = engine.query("When was the Eiffel Tower completed?")
    verified = FaithragVerifier(kb="trusted/", llm=Settings.llm).verify(
        "When was the Eiffel Tower completed?", response)
    print(verified.response, verified.metadata["faithrag"]["decision"])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from faithrag.errors import InputError, MissingExtraError

try:
    from llama_index.core.base.response.schema import Response, StreamingResponse
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.callbacks import CBEventType, EventPayload
    from llama_index.core.llms import LLM as LlamaIndexLLM
    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import BaseComponent, MetadataMode, NodeWithScore, QueryBundle
except ImportError as exc:
    raise MissingExtraError("The LlamaIndex adapter", "llamaindex",
                            f"Importing llama_index.core failed: {exc}.") from exc

from faithrag.config import Config
from faithrag.integrations import rank_scores, unique_id
from faithrag.integrations.chat_llm import ChatModelLLM, ChatReply, check_text_only
from faithrag.llm.base import LLM, Message
from faithrag.pipeline import Pipeline, Result, configure
from faithrag.types import Passage

__all__ = ["FaithragCrossValRerank", "FaithragVerifier", "chat_model_llm"]

RANK_KEY, REMOVED_KEY, CONFLICTS_KEY = "faithrag_rank", "faithrag_removed", "faithrag_conflicts"
RETRIEVAL_SCORE_KEY = "retrieval_score"  # where SentenceTransformerRerank keeps it
HIDDEN = (RANK_KEY, REMOVED_KEY, CONFLICTS_KEY, RETRIEVAL_SCORE_KEY)
RESPONSE_KEY = "faithrag"
TITLE_KEYS = ("title", "document_title")
SOURCE_KEYS = ("file_path", "url", "source")


class FaithragCrossValRerank(BaseNodePostprocessor):
    """faithrag's cross-validated re-ranker (`rerank="crossval"`) as a node post-processor.

    In: the retrieved nodes and the query (`postprocess_nodes(nodes, query_str=...)`, or a
    query engine's `node_postprocessors=[...]`). Out: the first `top_n` kept nodes, re-ordered
    and scored by rank, as copies carrying `faithrag_rank`, `faithrag_removed` and
    `faithrag_conflicts` in their metadata; removed nodes are dropped. No nodes in, no nodes
    out, and no model call.

    Example:
        reranker = FaithragCrossValRerank(llm=Settings.llm, top_n=3)
        engine = index.as_query_engine(node_postprocessors=[reranker])
        kept = reranker.postprocess_nodes(retriever.retrieve(question), query_str=question)
    """

    config: dict[str, Any] = Field(
        description="faithrag's configuration (pipeline.rerank is crossval); llm.api_key blank.")
    top_n: int = Field(default=5, ge=1, description="Number of nodes to return.")
    keep_retrieval_score: bool = Field(
        default=False, description="Whether to keep the retrieval score in metadata.")
    _pipeline: Pipeline = PrivateAttr()
    _model_name: str = PrivateAttr()

    def __init__(self, config: Config | str | Path | Mapping[str, Any] | None = None, *,
                 llm: LlamaIndexLLM | LLM | None = None, top_n: int = 5,
                 keep_retrieval_score: bool = False, **settings: Any) -> None:
        """`config` and `settings` as `faithrag.Pipeline.from_config` takes them (re-ranking is
        crossval whatever they say); `llm` a LlamaIndex LLM or a loaded faithrag model, else
        `config.llm` is loaded. A bad setting raises ConfigError before any model loads."""
        resolved, pipeline, model_name = build_pipeline("FaithragCrossValRerank", config, llm,
                                                        settings, rerank="crossval", verify=None)
        super().__init__(config=serialisable(resolved), top_n=top_n,
                         keep_retrieval_score=keep_retrieval_score)
        self._pipeline, self._model_name = pipeline, model_name

    @classmethod
    def class_name(cls) -> str:
        return "FaithragCrossValRerank"

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if query_bundle is None:
            raise InputError("The cross-validated re-ranker needs the query.",
                             "Call postprocess_nodes(nodes, query_str=...) or "
                             "postprocess_nodes(nodes, query_bundle=...).")
        if not nodes:
            return []
        passages, by_id = to_passages(nodes)
        with self.callback_manager.event(
                CBEventType.RERANKING,
                payload={EventPayload.NODES: nodes, EventPayload.QUERY_STR: query_bundle.query_str,
                         EventPayload.MODEL_NAME: self._model_name,
                         EventPayload.TOP_K: self.top_n}) as event:
            result = self._pipeline.rerank(query_bundle.query_str, passages)
            kept = annotate(result, by_id, self.keep_retrieval_score)[: self.top_n]
            event.on_end(payload={EventPayload.NODES: kept})
        return kept


class FaithragVerifier(BaseComponent):
    """faithrag's anti-sycophancy verifier (`verify="antisyco"`) over a LlamaIndex answer.

    In: the query, the draft (a query engine's `Response`, whose `source_nodes` are the
    evidence, or a string with `nodes=`) and a trusted knowledge base given at construction
    (`kb=`, a file or folder of documents). Out: a new `Response` with the verified answer, the
    same source nodes, and `metadata["faithrag"]` = the verifier's record (`decision`: PASS,
    REPAIR or FALLBACK; `reasons`; `draft`; its judgements) plus `conflicts`, the conflict
    report. An empty draft raises InputError before any model call.

    Example:
        verifier = FaithragVerifier(kb="trusted/", llm=Settings.llm)
        verified = verifier.verify(question, query_engine.query(question))
        print(verified.response, verified.metadata["faithrag"]["decision"])
    """

    config: dict[str, Any] = Field(
        description="faithrag's configuration (pipeline.verify is antisyco); llm.api_key blank.")
    _pipeline: Pipeline = PrivateAttr()

    def __init__(self, config: Config | str | Path | Mapping[str, Any] | None = None, *,
                 llm: LlamaIndexLLM | LLM | None = None, kb: str | Path | None = None,
                 **settings: Any) -> None:
        """`config` and `settings` as `faithrag.Pipeline.from_config` takes them (verification
        is antisyco whatever they say); `kb` the trusted knowledge base (or antisyco.kb in
        `config`); `llm` a LlamaIndex LLM or a loaded faithrag model, else `config.llm` is
        loaded. A bad setting or a missing knowledge base raises ConfigError before any model
        loads."""
        if kb is not None:
            settings["antisyco__kb"] = str(kb)
        resolved, pipeline, _ = build_pipeline("FaithragVerifier", config, llm, settings,
                                               rerank=None, verify="antisyco")
        super().__init__(config=serialisable(resolved))
        self._pipeline = pipeline

    @classmethod
    def class_name(cls) -> str:
        return "FaithragVerifier"

    def verify(self, query: str | QueryBundle, response: Response | StreamingResponse | str,
               nodes: Sequence[NodeWithScore] | None = None) -> Response:
        """The verified answer to `query`. `nodes` default to the response's source nodes
        (none for a string draft); `response.metadata` is kept, with the record added under
        "faithrag". A `StreamingResponse` is read to its end first; any other response type
        (a `PydanticResponse`) raises InputError."""
        if isinstance(response, StreamingResponse):
            response = response.get_response()
        if isinstance(response, str):
            draft, metadata = response, {}
        elif isinstance(response, Response):
            draft, metadata = response.response or "", dict(response.metadata or {})
            nodes = response.source_nodes if nodes is None else nodes
        else:
            raise InputError(f"The draft must be a Response or a string, not a "
                             f"{type(response).__name__}.",
                             "Pass the answer text: verify(query, text, nodes=...).")
        nodes = list(nodes or [])
        question = query.query_str if isinstance(query, QueryBundle) else query
        result = self._pipeline.verify(question, to_passages(nodes)[0], draft)
        metadata[RESPONSE_KEY] = {**result.answer.meta,
                                  "conflicts": [asdict(c) for c in result.conflicts]}
        return Response(response=result.answer.text, source_nodes=nodes, metadata=metadata)


def chat_model_llm(llm: LlamaIndexLLM) -> ChatModelLLM:
    """`llm` as a faithrag LLM: one `llm.chat` per request, in its context window; the token
    counts that LlamaIndex's OpenAI LLMs report in `additional_kwargs` when present."""
    def chat(messages: Sequence[Message]) -> ChatReply:
        response = llm.chat([ChatMessage(role=MessageRole(m.role), content=m.content)
                             for m in messages])
        usage = response.additional_kwargs or {}
        return ChatReply(response.message.content or "", usage.get("prompt_tokens"),
                         usage.get("completion_tokens"))
    return ChatModelLLM(f"llamaindex:{type(llm).__name__}:{llm.metadata.model_name}", chat,
                        context_window=llm.metadata.context_window)


def build_pipeline(component: str, config: Config | str | Path | Mapping[str, Any] | None,
                   llm: LlamaIndexLLM | LLM | None, settings: dict[str, Any],
                   **stages: Any) -> tuple[Config, Pipeline, str]:
    """The validated configuration with `stages` forced, the pipeline it describes around `llm`
    (a LlamaIndex LLM is wrapped, and a setting it cannot run refused), and the model's name."""
    if isinstance(config, Mapping):
        config = Config.validated(dict(config))
    data = configure(config, **settings).model_dump()
    data["pipeline"].update(stages)
    resolved = Config.validated(data)
    if isinstance(llm, LlamaIndexLLM):
        check_text_only(resolved, component)
        llm = chat_model_llm(llm)
    pipeline = Pipeline.from_config(resolved, llm=llm)
    return resolved, pipeline, resolved.llm.model if llm is None else llm.name


def serialisable(config: Config) -> dict[str, Any]:
    """`config` as plain data for `to_dict`, without the server's bearer token."""
    data = config.model_dump(mode="json")
    data["llm"]["api_key"] = ""
    return data


def to_passages(nodes: Sequence[NodeWithScore]) -> tuple[list[Passage], dict[str, NodeWithScore]]:
    """faithrag passages for `nodes`, in order, and the node behind each passage id."""
    passages, by_id = [], {}
    for position, scored in enumerate(nodes, 1):
        node = scored.node
        base = node.node_id or f"node-{position}"
        passage_id = unique_id(base, by_id, "#")
        by_id[passage_id] = scored
        passages.append(Passage(id=passage_id, text=node.get_content(MetadataMode.NONE) or "",
                                title=first_value(node.metadata, TITLE_KEYS),
                                source=first_value(node.metadata, SOURCE_KEYS),
                                score=scored.score))
    return passages, by_id


def first_value(metadata: Mapping[str, Any], keys: Sequence[str]) -> str:
    """The first of `keys` set in `metadata`, as text ("" when none is)."""
    texts = (str(metadata[key]) for key in keys if metadata.get(key) is not None)
    return next((text for text in texts if text), "")


def annotate(result: Result, by_id: Mapping[str, NodeWithScore],
             keep_retrieval_score: bool) -> list[NodeWithScore]:
    """The kept nodes of `result`, in its order, scored by rank, as copies whose metadata
    records the rank, the removed nodes with their reasons, the conflicts and, with
    `keep_retrieval_score`, the retrieval score (all hidden from prompts and embeddings)."""
    removed = [{"node_id": by_id[r.passage.id].node.node_id, "reason": r.reason}
               for r in result.removed]
    conflicts = [asdict(c) for c in result.conflicts]
    kept = []
    scores = rank_scores(len(result.passages))
    for rank, (passage, score) in enumerate(zip(result.passages, scores), 1):
        scored = by_id[passage.id]
        node = scored.node
        retrieval = {RETRIEVAL_SCORE_KEY: scored.score} if keep_retrieval_score else {}
        copy = node.model_copy(update={
            "metadata": {**node.metadata, **retrieval, RANK_KEY: rank,
                         REMOVED_KEY: list(removed), CONFLICTS_KEY: list(conflicts)},
            "excluded_llm_metadata_keys": unique([*node.excluded_llm_metadata_keys, *HIDDEN]),
            "excluded_embed_metadata_keys": unique([*node.excluded_embed_metadata_keys, *HIDDEN])})
        kept.append(NodeWithScore(node=copy, score=score))
    return kept


def unique(keys: list[str]) -> list[str]:
    return list(dict.fromkeys(keys))

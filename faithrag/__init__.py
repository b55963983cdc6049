"""faithrag: retrieval-augmented generation that stays right when its evidence is in conflict.

The public API:

    from faithrag import Pipeline

    pipeline = Pipeline.from_config(docs="docs/", rerank="crossval")
    result = pipeline.run("Who founded the company?")
    print(result.answer.text)

- `Pipeline.from_config` builds every pipeline (the CLI, the server and the evaluation harness
  use it too); `Config` is the typed configuration it validates; `Result` what a run returns.
- `load_llm` loads a model from an `LLMConfig`; `FakeLLM` is the scripted model for tests.
- `index_documents` builds an on-disk index and `add_documents` extends one; `faithrag.registry.register` adds a stage.
- Every error a user can cause is a `FaithragError` with a `hint`.
"""

from faithrag._version import __version__
from faithrag.config import Config, LLMConfig
from faithrag.errors import ConfigError, FaithragError, InputError
from faithrag.llm import load_llm
from faithrag.llm.fake import FakeLLM
from faithrag.methods.base import RemovedPassage
from faithrag.pipeline import Pipeline, Result
from faithrag.retrieval.corpus import add_documents, index_documents
from faithrag.types import (
    Answer,
    Conflict,
    ConflictCheck,
    ConflictSide,
    Passage,
    Question,
    Step,
    Trace,
)

__all__ = [
    "Answer",
    "Config",
    "ConfigError",
    "Conflict",
    "ConflictCheck",
    "ConflictSide",
    "FaithragError",
    "FakeLLM",
    "InputError",
    "LLMConfig",
    "Passage",
    "Pipeline",
    "Question",
    "RemovedPassage",
    "Result",
    "Step",
    "Trace",
    "__version__",
    "add_documents",
    "index_documents",
    "load_llm",
]

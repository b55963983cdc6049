"""faithrag: retrieval-augmented generation that stays right when its evidence is in conflict."""

from faithrag.types import Answer, Passage, Question, Trace

__version__ = "0.1.0"
__all__ = ["Answer", "Passage", "Question", "Trace", "__version__"]

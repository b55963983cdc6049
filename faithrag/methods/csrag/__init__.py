"""CSRAG, conflict-suppressed decoding: facts -> paraphrases -> biased decoding."""

from faithrag.methods.csrag.cache import JsonCache
from faithrag.methods.csrag.generator import CSRAG, enhanced_context
from faithrag.methods.csrag.paraphrase import Paraphraser

__all__ = ["CSRAG", "JsonCache", "Paraphraser", "enhanced_context"]

"""CSRAG, conflict-suppressed decoding: facts -> paraphrases -> biased decoding."""

from faithrag.methods.csrag.cache import JsonCache
from faithrag.methods.csrag.generator import ABLATION_GRID, CSRAG, AblationCell, enhanced_context
from faithrag.methods.csrag.paraphrase import Paraphraser

__all__ = ["ABLATION_GRID", "CSRAG", "AblationCell", "JsonCache", "Paraphraser", "enhanced_context"]

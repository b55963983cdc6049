"""CF-RAG: counterfactual exploration and parallel arbitration against the correlation trap.
The generator and the list of deviations from the paper are in cfrag.py."""

from faithrag.methods.cfrag.cfrag import CFRAG, build_cfrag

__all__ = ["CFRAG", "build_cfrag"]

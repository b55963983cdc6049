"""Adapters that put faithrag's stages inside other RAG frameworks, one module per framework,
each behind its own extra (faithrag[haystack], faithrag[llamaindex], faithrag[langchain])."""

"""Plain-Python components: loading, chunking, indexing, retrieval and web search.

Nothing here imports LangGraph, so every piece is usable on its own.
"""

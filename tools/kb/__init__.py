"""The knowledge base: what is known, how it is stored and how it is found.

One sub-package per pipeline stage, imports one way (``pyproject.toml``'s contract):
``documents`` (the library behind the document API) → ``knowledge_base`` (the facade:
``KnowledgeBase``) → ``ingest`` | ``search`` → ``index`` → ``store`` → ``embed``.
ARCHITECTURE.md draws a query's path through them; plain Python, no LangGraph.
"""

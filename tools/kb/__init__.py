"""The knowledge base: what is known, how it is stored and how it is found.

Owns loading documents (plain text and Markdown in ``loaders``; PDF, Word, HTML, Excel
and CSV through ``formats``, each as Markdown with page and sheet markers) and chunking
them, tokenising (jieba, light stemming), the BM25 index,
embedding models (bundled offline ones and OpenAI-compatible ones) and their cache, the
Chroma store and its registry commit protocol, hybrid retrieval with per-query score
fusion, the calibrated answerability of what was retrieved, and second-stage reranking.
``knowledge_base.KnowledgeBase`` is the entry point (ARCHITECTURE.md draws how the modules
fit together); plain Python, no LangGraph.
"""

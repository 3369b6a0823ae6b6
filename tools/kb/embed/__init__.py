"""Embed: embedding models chosen by a string (``embeddings``), the vectors' persistent
cache (``embedding_cache``) and the bundled offline models (``local_embeddings``)."""

"""The Chroma backend (embedded, or a ``chroma run`` server): the chunk collection
(``chroma_store``, read in pages by ``chroma_pages``) and the registry collection whose
one upsert commits an ingest (``chroma_registry``)."""

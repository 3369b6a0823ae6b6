"""Ingest: which files (``identity``), read as Markdown (``loaders``, ``formats/``), titled
(``titles``), cut to the token bound (``chunking``, ``splitting``), made into versioned records
(``chunk_records``), then embedded, written and committed by version (``ingester``), all
under the knowledge base's one writer (``kb_writer``)."""

"""Ingest: which files (``identity``), read as Markdown (``loaders``, ``formats/``), titled
(``titles``), cut to the token bound (``chunking``, ``splitting``), then embedded, written and
committed by version (``ingester``)."""

"""Store: what is kept. Chroma's chunk collection (``chroma``, read in pages by
``chroma_pages``, bounded by the run's deadline in ``chroma_deadline``), the registry whose
one upsert commits an ingest (``registry``) and one writer at a time (``writer_lock``)."""

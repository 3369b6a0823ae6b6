"""Store: what is kept, behind one protocol (``protocol``: the chunks and the registry
whose one commit makes an ingest visible), by backend: ``chroma/`` (the default) or
``postgres/`` (a ``database_url``), chosen by ``backends``. Shared by both: one writer at
a time (``writer_lock``), the documents a writer was changing (``pending``), the run's
deadline over store requests (``store_deadline``) and ``kb migrate`` (``pg_migrate``:
an embedded Chroma home into PostgreSQL)."""

"""The PostgreSQL backend (pgvector; the ``postgres`` extra): opened by ``pg_backend``
from its URLs (``pg_urls``, checked without psycopg), connections to the primary and the
replicas (``pg_connections``), the tables (``pg_schema``, ``pg_probe``), the chunk table
(``pg_store``) and the registry committed with the generation (``pg_registry``)."""

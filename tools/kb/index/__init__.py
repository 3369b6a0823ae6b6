"""Index: what a search reads, derived from the store and never written beside it: the
snapshot of the active chunks per generation (``snapshot``), the tantivy lexical index
(``lexical``), in-memory BM25 for small per-request corpora (``bm25``) and the tokens both
index (``tokenizers``)."""

"""Embed: embedding models chosen by a string, their cache (``embeddings``) and the bundled
offline models (``local_embeddings``)."""

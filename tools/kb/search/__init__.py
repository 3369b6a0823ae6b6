"""Search: one query top to bottom. ``retriever`` (caches, filters) → ``languages`` (a pool
per document language and their merge) → ``candidates`` (each retriever's top n, both scores
for each) → ``centring`` (cosines comparable across languages) → ``fusion`` (one component,
its modes) → ``answerability`` (the calibrated probability the hits answer); ``rerankers``
are the optional second stage."""

"""Search: one component per role, a query flowing down them once (``pipeline``): the
retrievers (``retrievers``: lexical, and dense with its modes, a pool per document
language and centred cosines, ``dense``) → the joiner (``joiner``: fusion, ``fusion``, and
the merge of language pools) → the ranker (``ranker``) → the answerability judge
(``answerability``); ``candidates`` is what they pass down, ``rerankers`` the optional
second stage."""

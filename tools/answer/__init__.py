"""Answers with verifiable citations: sources, labels, the answer prompt's context.

Owns the shape of a source (KB chunk or web result), the ``[internal-n]``/``[web-n]``
(``[内部-n]``/``[网络-n]``) labels and their validation, the fenced and budgeted context
an answer model reads, and the agent's ``internal_search``/``google_search`` tools.
"""

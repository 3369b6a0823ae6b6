"""Who may read which document.

``acl`` owns a document's access list (the principals ``user:NAME`` and ``group:NAME``
given at ingest, by ``--acl`` or a folder's ``.acl`` file) and the ``Reader`` a search
runs as: the caller's principals, or every document for local use. ``users`` owns the
server's user directory (bearer tokens, stored hashed, mapped to a user and groups);
``passwords`` their Argon2id passwords, ``sessions`` the browsers' sessions,
``login_limits`` failed sign-ins, ``sso_users`` the users single sign-on writes.
Plain Python: the knowledge base filters with it, the LangGraph auth handler
(``server/auth.py``) and the run settings build a ``Reader`` from it.
"""

"""What one run of either graph needs at run time, below the nodes.

The run's types (``context.Context``, what a server's caller may set of it:
``api_context``; ``state``, ``reducers``) and its services: the
settings read once per run (``run_settings``), the shared knowledge base (``resources``),
models, the search service (``search_setup``), the caller's reader (``reader``), the web
search approval (``approval_interrupt``), the deadline, tracing, localized notices and the
helpers every node uses (``node_helpers``). Imports run ``graph → nodes → run → tools``.
"""

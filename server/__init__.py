"""Everything HTTP: what ``langgraph.json`` and ``server/aegra.json`` serve.

The graph factories behind the run-context check (``graphs``), the auth handler
(``auth``), the caller's credential and the CSRF check (``credentials``), the sign-in
routes (``signin_api``, ``oidc``), the document and sources APIs (``documents_api``, ``sources_api``,
``api_caller``), MCP (``mcp_tools``, ``mcp_documents``), the page route (``ui``), the
custom routes app (``webapp``), what a client may set (``request_guard``) and the
production server (``aegra_app``, ``aegra_config``). Imports run ``cli → server → graph``.
"""

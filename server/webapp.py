"""The server's own HTTP routes, mounted beside the graphs' API (langgraph.json "http.app").

Each front-end adds its routes here as one list (the document API, the page), so the
composition of the server's surface is read in one place.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from server import (
    admin_api,
    collections_api,
    document_access_api,
    documents_api,
    feedback_api,
    groups_api,
    keys_api,
    mcp_tools,
    signin_api,
    sources_api,
    thread_share_api,
)
from server.api_errors import error_answer
from server.credentials import CsrfGuard
from server.request_guard import RequestGuard
from server.ui import ui_routes


def routes() -> list[BaseRoute]:
    """Every custom route of the server, in the order Starlette matches them."""
    return [
        *signin_api.routes(),
        *mcp_tools.routes(),
        *document_access_api.routes(),
        *documents_api.routes(),
        *sources_api.routes(),
        *feedback_api.routes(),
        *admin_api.routes(),
        *keys_api.routes(),
        *groups_api.routes(),
        *collections_api.routes(),
        *thread_share_api.routes(),
        *ui_routes(),
    ]


async def failed(request: Request, exc: Exception) -> Response:
    """What escapes a route is ``{"error": ...}`` too (``server.api_errors``), never a
    traceback or a ``{"detail"}`` with a codec's message."""
    return error_answer(exc)


# langgraph-api applies the custom app's middleware to every route, its own API included:
# what a client may set in a run is checked there as on Aegra (server/request_guard.py),
# and a cookie-signed change needs its CSRF token (server/credentials.py), first.
app = Starlette(
    routes=routes(),
    middleware=[Middleware(CsrfGuard), Middleware(RequestGuard)],
    exception_handlers={Exception: failed},
)

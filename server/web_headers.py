"""The security headers of the server's own routes: the page (``/ui``), the document API
(``/kb``) and the original files it serves.

The page runs only its own scripts (``script-src 'self'``: no inline script, no inline
handler, no ``eval``), is never framed (``frame-ancestors 'none'``), and nothing it
loads is sniffed into another type or sends the page's address away. An original file
is a stranger's bytes: it is served sandboxed (``sandbox``: no script, no same-origin
access, even when a browser renders it), and a type a browser may render actively
(HTML, SVG, XML ...) only as an attachment (``tools.kb.documents.originals.serving``).

Both servers mount the same routes (``server/webapp.py``), so the headers are attached
by the routes themselves: langgraph dev and Aegra serve them alike.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
API_CSP = "default-src 'none'; frame-ancestors 'none'; sandbox"
COMMON = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
PAGE_HEADERS = {**COMMON, "Content-Security-Policy": PAGE_CSP}
API_HEADERS = {**COMMON, "Content-Security-Policy": API_CSP, "Cache-Control": "no-store"}


def add_missing(headers: MutableHeaders, extra: Mapping[str, str]) -> None:
    """Set each of ``extra`` the response does not set itself."""
    for name, value in extra.items():
        if name not in headers:
            headers[name] = value


class WithHeaders:
    """An ASGI app answering as ``app`` does, with ``headers`` on every response."""

    def __init__(self, app: ASGIApp, headers: Mapping[str, str]) -> None:
        self.app = app
        self.headers = dict(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                add_missing(MutableHeaders(scope=message), self.headers)
            await send(message)

        await self.app(scope, receive, sending)

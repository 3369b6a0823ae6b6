"""The page for the people who ask (``/ui``): static files, served by the server itself.

The files live in the top-level ``web`` package (plain HTML, CSS and JavaScript modules,
no build step), shipped as package data so an installed copy serves them too. Loading
them needs no token; every API call the page makes carries the user's own.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from server.web_headers import PAGE_HEADERS, WithHeaders

UI_PATH = "/ui"


def static_dir() -> Path:
    """Where the page's files are (the ``web`` package's folder, installed or not)."""
    return Path(str(files("web")))


async def _to_page(request: Request) -> Response:
    return RedirectResponse(f"{UI_PATH}/", status_code=307, headers=PAGE_HEADERS)


def ui_routes() -> list[BaseRoute]:
    """``/ui`` → ``/ui/``, and the files under it (``index.html`` for the folder), each
    with the page's security headers (``server.web_headers``)."""
    files = StaticFiles(directory=static_dir(), html=True)
    return [
        Route(UI_PATH, _to_page, methods=["GET"]),
        Mount(UI_PATH, app=WithHeaders(files, PAGE_HEADERS), name="ui"),
    ]

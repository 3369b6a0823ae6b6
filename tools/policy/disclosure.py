"""What a user is told about the server's own configuration (issue 45): a web search that
is not set up on this server says so plainly to the people who ask; the detail that fixes
it (environment variable names, a ``pip install``) is for the operator (an admin, or the
command line: local use). Said once, in the answer's note, never again under its notes.
Both graphs and every front-end call these."""

from __future__ import annotations

import re
from collections.abc import Sequence

WEB_NOT_AVAILABLE = "web search is not available on this server"
# A reason that names the server's configuration: its settings or its installation.
_CONFIGURATION = re.compile(
    r"not configured|search_provider=|pip install|package is not installed"
    r"|\b[A-Z][A-Z0-9]*_(?:API_KEY|BASE_URL|KEY|TOKEN)\b"
)


def names_configuration(reason: str) -> bool:
    """Whether ``reason`` tells how the server is set up (for its operator only)."""
    return bool(_CONFIGURATION.search(reason))


def web_reason_for(reason: str, *, operator: bool) -> str:
    """``reason`` (why the web was not searched) as this user reads it: the operator the
    whole of it; anyone else, for a reason about the configuration, that web search is not
    available on this server."""
    if operator or not names_configuration(reason):
        return reason
    return WEB_NOT_AVAILABLE


def shown_warnings(warnings: Sequence[str], noted: str | None, *, operator: bool) -> list[str]:
    """The run's notes as this user reads them: none repeating ``noted`` (the web failure
    the answer's note already states), none with the configuration's detail for anyone
    but the operator (said once, plainly, instead)."""
    shown: list[str] = []
    for warning in warnings:
        if noted and noted in warning:
            continue
        said = warning if operator or not names_configuration(warning) else WEB_NOT_AVAILABLE
        if said not in shown:
            shown.append(said)
    return shown

"""The knowledge base's document list as an MCP tool, ``kb_documents``: what the caller
may read (path, title, format, chunks, last update), so a calling agent can see what
the knowledge base holds before it asks.

It reads the server's own document API (``GET /kb/documents``, ``server/documents_api.py``)
on the local socket with the caller's token, so the same access rules decide what is
listed, exactly as for the page or any other client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

TOOL = "kb_documents"
DEFAULT_LIMIT, MAX_LIMIT = 50, 200
MAX_CONTAINS = 500  # characters: a path or title filter, sent in the URL's query
TIMEOUT_S = 30.0  # a listing reads the registry only: no search, no model
FIELDS = ("path", "title", "format", "chunks", "updated_at")
# The API's answers that are about the caller, not the call: the endpoint passes them on
# as HTTP errors, as it does for the graph tools.
CALLER_ERRORS = (401, 403, 503)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "contains": {
            "type": "string",
            "maxLength": MAX_CONTAINS,
            "description": "only documents whose path or title contains this text",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "description": f"the most documents to list (default {DEFAULT_LIMIT})",
        },
    },
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "documents": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "title": {"type": ["string", "null"]},
                    "format": {"type": ["string", "null"]},
                    "chunks": {"type": ["integer", "null"]},
                    "updated_at": {"type": ["string", "null"]},
                },
                "required": ["path"],
            },
        },
        "total": {"type": "integer"},
    },
    "required": ["documents", "total"],
}


def tool() -> dict[str, Any]:
    """The tool as ``tools/list`` shows it."""
    return {
        "name": TOOL,
        "title": "Knowledge base documents",
        "description": (
            "List the documents of the team's knowledge base that you may read: path, "
            "title, format, number of chunks and last update. Use it to see what the "
            'knowledge base holds; send {} for all, or {"contains": "leave"} to filter '
            "by path or title. To get answers from the documents, call a question tool."
        ),
        "inputSchema": INPUT_SCHEMA,
        "outputSchema": OUTPUT_SCHEMA,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }


def bad_arguments(arguments: Any) -> str | None:
    """What is wrong with a call's arguments (None: nothing)."""
    if arguments is None:
        return None
    if not isinstance(arguments, Mapping):
        return 'arguments must be an object: {} or {"contains": "...", "limit": 50}'
    unknown = sorted(set(arguments) - {"contains", "limit"})
    if unknown:
        return f'unknown argument(s) {", ".join(unknown)}: send {{"contains": "...", "limit": 50}}'
    contains = arguments.get("contains", "")
    if not isinstance(contains, str):
        return "contains must be text"
    if len(contains) > MAX_CONTAINS:
        return (
            f"contains is {len(contains):,} characters, over the limit of {MAX_CONTAINS}: "
            "send a part of a path or title"
        )
    limit = arguments.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        return f"limit must be a whole number in 1..{MAX_LIMIT}, got {limit!r}"
    return None


def result(listing: Mapping[str, Any]) -> dict[str, Any]:
    """The listing as text (one line a document) and as structured content."""
    documents = [
        {k: d.get(k) for k in FIELDS}
        for d in listing.get("documents") or []
        if isinstance(d, Mapping) and d.get("path")
    ]
    total = int(listing.get("total") or len(documents))
    lines = [
        f"{d['path']} — {d['title'] or ''} ({d['format'] or '?'}, {d['chunks'] or 0} chunks"
        + (f", updated {d['updated_at']})" if d["updated_at"] else ")")
        for d in documents
    ]
    shown = f"{len(documents)} of {total} documents" if total > len(documents) else ""
    text = (
        "\n".join([*lines, shown]).strip() or "The knowledge base holds no document you may read."
    )
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"documents": documents, "total": total},
        "isError": False,
    }


async def call(base_url: str, headers: Mapping[str, str], arguments: Any) -> dict[str, Any]:
    """The JSON-RPC ``result`` of one call; raises ``httpx.HTTPStatusError`` when the API
    refuses the caller (see ``CALLER_ERRORS``)."""
    args = arguments or {}
    params: dict[str, str | int] = {
        "limit": int(args.get("limit", DEFAULT_LIMIT)),
        "q": str(args.get("contains", "")),
    }
    try:
        async with httpx.AsyncClient(
            base_url=base_url, headers=dict(headers), timeout=TIMEOUT_S
        ) as h:
            response = await h.get("/kb/documents", params=params)
    except httpx.TransportError as exc:  # the connection dropped or timed out
        return _error(f"the document list failed: {type(exc).__name__}: {exc}")
    if response.status_code in CALLER_ERRORS:
        response.raise_for_status()
    if response.status_code != 200:
        detail = response.text[:300]
        return _error(f"the document list failed ({response.status_code}): {detail}")
    return result(response.json())


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}

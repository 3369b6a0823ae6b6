"""The server's MCP endpoint (``/mcp``, streamable HTTP, JSON responses): each graph, and
each assistant the caller owns, as one tool whose result is the answer with its numbered
sources as text, plus the same as structured content; and ``kb_documents``, the documents
the caller may read (``server/mcp_documents.py``).

Mounted by ``server/webapp.py`` ahead of langgraph-api's own ``/mcp`` (custom routes come
first), whose tool result is the ``repr`` of the whole run state and whose listing breaks
on two assistants of one name; Aegra has no MCP endpoint, and gets this one. Every tool
call goes through the server's own Agent Protocol API on the local socket with the
caller's credentials, so the auth handler (``server/auth.py``) decides who the caller is
and what they read, exactly as for any other client.

Names: a graph's own assistant is its graph's name; an assistant a user created is its
name made MCP-safe, with ``_<first 8 of its id>`` appended when an older visible one took
that name already (stable: the oldest keeps the plain name). Without a users file every
caller is the same local user, so only the graphs are listed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Mapping
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any, get_type_hints

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from run.context import Context
from run.state import InputState
from server import mcp_documents
from server.api_caller import Refused
from server.auth import users_file
from server.json_body import json_body
from tools.access.scope import EXPECTED as SCOPE_EXPECTED
from tools.access.scope import parse_scope
from tools.errors import FieldError, InputError

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MAX_ASSISTANTS = 100  # the most one search returns on Aegra (le=100)
CALL_TIMEOUT_S = 600.0  # a run ends at its own deadline (run_timeout_s) well before this
FORWARDED = ("authorization", "x-api-key", "cookie", "x-csrf-token")  # what credentials.py reads
INVALID_PARAMS, METHOD_NOT_FOUND = -32602, -32601
_UNSAFE = re.compile(r"[^a-zA-Z0-9_\-.]")

SOURCE = {
    "type": "object",
    "properties": {
        "label": {"type": "string"},
        "title": {"type": ["string", "null"]},
        "path": {"type": ["string", "null"]},
        "url": {"type": ["string", "null"]},
        "heading": {"type": ["string", "null"]},
    },
    "required": ["label"],
}
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "sources": {"type": "array", "items": SOURCE},
        "warnings": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["answer", "sources"],
}


@cache
def graph_descriptions(config_file: str) -> dict[str, str]:
    """Each graph's description: the ``descriptions`` of the Aegra config
    (``server/aegra.json`` carries them; Aegra gives the graphs' own assistants a generic
    one), else those of the ``langgraph.json`` beside it (langgraph-api's own)."""

    def read(path: Path) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    path = Path(config_file)
    config = read(path)
    if isinstance(config, dict) and isinstance(config.get("descriptions"), dict):
        return {str(k): str(v) for k, v in config["descriptions"].items()}
    config = read(path.parent / "langgraph.json")
    graphs = config.get("graphs") if isinstance(config, dict) else None
    return {
        str(name): str(spec["description"])
        for name, spec in (graphs or {}).items()
        if isinstance(spec, dict) and spec.get("description")
    }


def served_descriptions() -> dict[str, str]:
    """The graphs' descriptions of the config this server runs (blocking: file system)."""
    config = os.environ.get("AEGRA_CONFIG", "").strip() or "aegra.json"  # Aegra's default
    return graph_descriptions(str(Path(config).resolve()))


def describe(assistant: Mapping[str, Any], graphs: Mapping[str, str]) -> str:
    """What a calling model reads: a user's assistant's own description, else its graph's."""
    system = (assistant.get("metadata") or {}).get("created_by") == "system"
    graph = str(assistant.get("graph_id") or "")
    if system and graph in graphs:
        return graphs[graph]
    return str(assistant.get("description") or f"The {graph} graph.")


def input_schema() -> dict[str, Any]:
    """The tool's input: the question (its description is the graphs' input schema's)."""
    hint = get_type_hints(InputState, include_extras=True)["question"]
    description = next(m.description for m in hint.__metadata__ if hasattr(m, "description"))
    scope = next(f for f in fields(Context) if f.name == "scope")
    return {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": description},
            "scope": {"type": "string", "description": scope.metadata["description"]},
        },
        "required": ["question"],
    }


def tool_name(name: str) -> str:
    """An assistant's name as MCP allows tool names (``^[a-zA-Z0-9_\\-.]{1,128}$``)."""
    return _UNSAFE.sub("", re.sub(r"\s+", "_", name.strip()))[:119]


def named_tools(assistants: list[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Tool name -> assistant, every name unique: the graphs' own assistants first, then the
    others oldest first; a taken name gets ``_<first 8 of the assistant id>``."""

    def order(a: Mapping[str, Any]) -> tuple[bool, str, str]:
        system = (a.get("metadata") or {}).get("created_by") == "system"
        return (not system, str(a.get("created_at") or ""), str(a["assistant_id"]))

    tools: dict[str, Mapping[str, Any]] = {}
    for assistant in sorted(assistants, key=order):
        name = tool_name(str(assistant.get("name") or "")) or "assistant"
        if name in tools or name == mcp_documents.TOOL:
            name = f"{name}_{str(assistant['assistant_id'])[:8]}"
        tools.setdefault(name, assistant)
    return tools


def tool_result(value: Any) -> dict[str, Any]:
    """The answer with its numbered sources, as text and as structured content."""
    state = value if isinstance(value, Mapping) else {}
    sources = [_source(c) for c in state.get("citations") or [] if isinstance(c, Mapping)]
    warnings = [str(w) for w in state.get("warnings") or []]
    answer = str(state.get("answer") or "")
    lines = [answer]
    if sources:
        lines += ["", "Sources:"]
        lines += [f"{s['label']} {s['title'] or ''} — {_where(s)}".strip() for s in sources]
    lines += [f"warning: {w}" for w in warnings]
    structured = {"answer": answer, "sources": sources, "warnings": warnings}
    return {
        "content": [{"type": "text", "text": "\n".join(lines)}],
        "structuredContent": structured,
        "isError": not answer,
    }


def _source(c: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("title", "path", "url", "heading")
    return {"label": str(c.get("label") or ""), **{k: c.get(k) for k in keep}}


def _where(s: Mapping[str, Any]) -> str:
    if s.get("url"):
        return str(s["url"])
    return f"{s.get('path') or ''}" + (f" § {s['heading']}" if s.get("heading") else "")


def _error(text: str) -> dict[str, Any]:
    return {"result": {"content": [{"type": "text", "text": text}], "isError": True}}


def own_url(scope: Mapping[str, Any]) -> str:
    """This server, on the socket the request came in by."""
    host, port = scope.get("server") or ("127.0.0.1", 80)
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def caller_credentials(scope: Mapping[str, Any]) -> dict[str, str]:
    """The request's token headers, to call this server as the caller."""
    return {
        k.decode("latin-1"): v.decode("latin-1")
        for k, v in scope.get("headers", [])
        if k.decode("latin-1").lower() in FORWARDED
    }


def _client(request: Request) -> Any:
    """An SDK client of this server, as the caller."""
    scope = request.scope
    headers = caller_credentials(scope)
    # The SDK refuses x-api-key among headers ("reserved"): it sends it from api_key.
    key = headers.pop("x-api-key", None)
    return get_client(url=own_url(scope), api_key=key, headers=headers, timeout=CALL_TIMEOUT_S)


async def _tools(request: Request) -> dict[str, Mapping[str, Any]]:
    client = _client(request)
    metadata = None if users_file() else {"created_by": "system"}
    found = await client.assistants.search(metadata=metadata, limit=MAX_ASSISTANTS)
    return named_tools(list(found))


async def list_tools(request: Request) -> dict[str, Any]:
    graphs = await asyncio.to_thread(served_descriptions)
    tools = [
        {
            "name": name,
            "title": str(a.get("name") or name),
            "description": describe(a, graphs),
            "inputSchema": input_schema(),
            "outputSchema": OUTPUT_SCHEMA,
            "annotations": {"readOnlyHint": True, "openWorldHint": True},
        }
        for name, a in (await _tools(request)).items()
    ]
    return {"result": {"tools": [*tools, mcp_documents.tool()]}}


def bad_arguments(arguments: Any) -> str | None:
    """What is wrong with a tool call's arguments (None: nothing)."""
    if not isinstance(arguments, Mapping):
        return 'arguments must be an object: {"question": "..."}'
    unknown = sorted(set(arguments) - {"question", "scope"})
    if unknown:
        return f'unknown argument(s) {", ".join(unknown)}: send {{"question": "..."}}'
    question = arguments.get("question")
    if not isinstance(question, str) or not question.strip():
        return 'the question is missing or empty: send {"question": "..."}'
    scope = arguments.get("scope") or ""
    if not isinstance(scope, str):
        return f"scope must be a string ({SCOPE_EXPECTED})"
    try:
        parse_scope(scope)
    except InputError as exc:
        return str(exc)
    return None


async def call_tool(request: Request, params: Mapping[str, Any]) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments")
    if name == mcp_documents.TOOL:
        problem = mcp_documents.bad_arguments(arguments)
        if problem:
            return _error(problem)
        scope = request.scope
        reply = await mcp_documents.call(own_url(scope), caller_credentials(scope), arguments)
        return {"result": reply}
    tools = await _tools(request)
    if name not in tools:
        known = ", ".join(sorted([*tools, mcp_documents.TOOL]))
        return {"error": {"code": INVALID_PARAMS, "message": f"Unknown tool: {name} ({known})"}}
    problem = bad_arguments(arguments)
    if problem:
        return _error(problem)
    client = _client(request)
    run_scope = str(arguments.get("scope") or "").strip()  # type: ignore[union-attr]
    thread = await client.threads.create(metadata={"via": "mcp"})
    value = await client.runs.wait(
        thread["thread_id"],
        str(tools[str(name)]["assistant_id"]),
        input={"question": arguments["question"]},  # type: ignore[index]
        **({"context": {"scope": run_scope}} if run_scope else {}),
        raise_error=False,
    )
    if isinstance(value, Mapping) and "__error__" in value:
        err = value["__error__"] or {}
        return _error(f"{err.get('error', 'Error')}: {err.get('message', '')}".rstrip(": "))
    return {"result": tool_result(value)}


def initialize(params: Mapping[str, Any]) -> dict[str, Any]:
    asked = params.get("protocolVersion")
    version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
    return {
        "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "hybrid-rag", "version": "1"},
        }
    }


async def _answer(request: Request, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        return initialize(params)
    if method == "ping":
        return {"result": {}}
    if method == "tools/list":
        return await list_tools(request)
    if method == "tools/call":
        return await call_tool(request, params)
    return {"error": {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}}


def _http_error(message: str, status: int) -> Response:
    return JSONResponse({"error": message}, status_code=status)


async def endpoint(request: Request) -> Response:
    """One JSON-RPC message per POST (no server-sent stream by GET, no session to DELETE)."""
    if request.method != "POST":
        return Response(status_code=405, headers={"Allow": "POST"})
    try:
        message = await json_body(request)
    except Refused as exc:
        return _http_error(exc.message, exc.status)
    except FieldError as exc:
        return _http_error(str(exc), 422)
    except InputError as exc:
        return _http_error(str(exc), 400)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _http_error('expected one JSON-RPC 2.0 message ({"jsonrpc": "2.0", ...})', 400)
    if message.get("id") is None or not message.get("method"):
        return Response(status_code=202)  # a notification or a response: nothing to say
    params = message.get("params") or {}
    try:
        reply = await _answer(request, str(message["method"]), params)
    except (APIStatusError, httpx.HTTPStatusError) as exc:  # the API refused the caller
        return Response(
            exc.response.content,
            status_code=exc.response.status_code,
            media_type="application/json",
            headers={k: v for k, v in exc.response.headers.items() if k == "www-authenticate"},
        )
    return JSONResponse({"jsonrpc": "2.0", "id": message["id"], **reply})


def routes() -> list[BaseRoute]:
    return [Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])]

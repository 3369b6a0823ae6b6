"""The one way a custom route reads a JSON body: bounded before it is parsed, and every
value in it bounded too, so no request can make the server hold (or store) more than the
limits below.

* the body: ``MAX_BODY_BYTES`` (refused from its ``Content-Length`` before a byte is read,
  else once that much has arrived): 413 naming the limit;
* every string, list and object in it: ``MAX_STRING`` characters, ``MAX_ITEMS`` entries,
  ``MAX_DEPTH`` levels; and text that is not Unicode (a lone surrogate such as ``"\\ud800"``,
  which JSON's escapes allow but UTF-8 cannot store): 422 naming the field (``FieldError``).

A route's own parser then applies its fields' tighter limits (``tools.feedback.votes``).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from server.api_caller import Refused
from tools.errors import FieldError, InputError

MAX_BODY_BYTES = 1024 * 1024  # a vote, a set of 10,000 ids, a user, a source: all far below
MAX_STRING = 100_000
MAX_ITEMS = 10_000
MAX_DEPTH = 8


def _too_large(size: str) -> Refused:
    return Refused(
        413,
        f"the request body is {size}, over the {MAX_BODY_BYTES // 1024} KB limit of JSON bodies",
    )


async def read_bounded(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's body, or ``Refused(413)`` once it is over ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(f"{int(declared):,} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():  # ends with the body: the server bounds each read
        size += len(chunk)
        if size > limit:
            raise _too_large(f"more than {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def check_value(value: Any, where: str = "body", depth: int = 0) -> None:
    """``FieldError`` naming the first string, list or object of ``value`` over a limit."""
    if depth > MAX_DEPTH:
        raise FieldError(f"{where} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise FieldError(f"{where} is {len(value):,} characters, over the {MAX_STRING:,} limit")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise FieldError(f"{where} is not valid Unicode text (a lone surrogate)") from None
        return
    if isinstance(value, dict | list) and len(value) > MAX_ITEMS:
        raise FieldError(f"{where} has {len(value):,} entries, over the {MAX_ITEMS:,} limit")
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        items = [(f"{where}.{k}" if where != "body" else str(k), v) for k, v in value.items()]
        items += [(f"{where} key", k) for k in value]
    elif isinstance(value, list):
        items = [(f"{where}[{i}]", v) for i, v in enumerate(value)]
    for name, item in items:
        check_value(item, name, depth + 1)


async def json_body(request: Request, limit: int = MAX_BODY_BYTES) -> Any:
    """The request's JSON body, read within ``limit`` bytes and checked by ``check_value``;
    ``InputError`` when it is not JSON."""
    raw = await read_bounded(request, limit)
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise InputError("the body is not JSON (send one UTF-8 JSON object)") from None
    check_value(body)
    return body

"""The numbered sources after an answer, in the chat message a client renders.

The state keeps ``answer`` (the cited text) and ``citations`` (records); a chat client
(agent-chat-ui, an MCP caller reading ``messages``) only sees the final AI message. That
message is the answer followed by a Markdown block naming each label's source, so
``[internal-1]`` can be resolved by a reader of the message alone:

    ---
    **Sources**
    - [internal-1] Annual leave — policies/annual-leave.md, p. 3
    - [web-1] Holiday rules — <https://example.com/rules> (2025-01-02)

Web links are autolinks (``<url>``), never ``[text](url)``: a label followed by link
syntax would read as a reference link. :func:`without_sources` gives the answer back
(history of a follow-up question).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_HEADINGS = {"en": "**Sources**", "zh": "**来源**"}
_RULE = "\n\n---\n"


def _line(rec: Mapping[str, Any]) -> str:
    label = str(rec.get("label") or "")
    title = " ".join(str(rec.get("title") or "").split())
    if rec.get("type") == "web":
        url = str(rec.get("url") or "")
        where = f"<{url}>" if url.startswith(("http://", "https://")) else url
        date = str(rec.get("published_at") or "")[:10]
        parts = [p for p in (title, where) if p]
        return f"- {label} {' — '.join(parts)}" + (f" ({date})" if date else "")
    path = str(rec.get("path") or "")
    location = str(rec.get("location") or "")
    where = ", ".join(p for p in (path, location) if p)
    parts = [p for p in (title if title != path else "", where) if p]
    return f"- {label} {' — '.join(parts)}"


def sources_block(citations: Sequence[Mapping[str, Any]], language: str) -> str:
    """The Markdown block listing ``citations`` ('' when none)."""
    if not citations:
        return ""
    heading = _HEADINGS["zh" if language == "zh" else "en"]
    return f"{_RULE}{heading}\n" + "\n".join(_line(c) for c in citations)


def with_sources(answer: str, citations: Sequence[Mapping[str, Any]], language: str) -> str:
    """The chat message's text: the answer, then its sources block."""
    return f"{answer}{sources_block(citations, language)}"


def without_sources(message: str) -> str:
    """The answer part of a message :func:`with_sources` wrote (others unchanged)."""
    for heading in _HEADINGS.values():
        head, sep, _ = message.rpartition(f"{_RULE}{heading}\n")
        if sep:
            return head
    return message

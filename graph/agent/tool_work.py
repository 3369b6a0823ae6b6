"""The agent's two tools' work, ``internal_search`` and ``google_search``, as plain
async functions over a :class:`~tools.answer.search_service.SearchService`.

No LangGraph here: ``graph.agent.tools`` wraps them as LangChain tools that read their run
(context, state) from LangGraph's ``ToolRuntime``. The calls of one step share one
:class:`SourceRegistry`, which numbers sources stably across calls — the same chunk or URL
always gets the same label, internal and web are numbered separately — so the labels the
model reads in tool results are exactly the labels the citation check later resolves
(``tools.answer.citations``).

They never raise: a disabled or unconfigured web search, a provider outage, an empty
knowledge base, a store error or bad arguments come back to the model as one clear
sentence, so it can try something else or answer from what it has. (The one exception is
the service's ``approve`` hook, which may pause the run before a web search to ask a
person; see ``run.approval_interrupt``.) Each returns ``(text, artifact)``: the model sees the
compact text, the caller gets a :class:`ToolOutcome`-shaped dict (sources found, search
cost and upstream calls, warnings) as the ``ToolMessage.artifact``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ValidationError

from tools.answer.citations import SourceKind, labelled
from tools.answer.context_builder import cut_snippet, fence, neutralise
from tools.answer.passage_focus import focus_passage
from tools.answer.search_service import SearchService, WebFound
from tools.errors import InputError
from tools.kb.search.rerankers import Reranker
from tools.policy.disclosure import WEB_NOT_AVAILABLE, names_setup
from tools.websearch import build_params

INTERNAL_SEARCH = "internal_search"
GOOGLE_SEARCH = "google_search"


class SourceRegistry:
    """Numbers the sources of one run stably: the same chunk or URL keeps its label on
    every call, internal and web sources are numbered separately from 1. Rebuilt from
    ``state["sources"]`` at each step, so labels survive between graph steps."""

    def __init__(self, language: str, sources: Iterable[dict[str, Any]] = ()) -> None:
        self.language = "zh" if language == "zh" else "en"
        self._by_key: dict[tuple[str, str], dict[str, Any]] = {}
        self._counters: dict[str, int] = {"internal": 0, "web": 0}
        for src in sources:
            kind = self._kind(src)
            number = int(src.get("number") or 0)
            if number < 1:  # an unlabelled source: number it like a new one
                self.add(src)
                continue
            self._by_key[(kind, str(src["id"]))] = dict(src)
            self._counters[kind] = max(self._counters[kind], number)

    @staticmethod
    def _kind(src: Mapping[str, Any]) -> SourceKind:
        return "web" if src.get("kind") == "web" else "internal"

    def add(self, src: Mapping[str, Any]) -> dict[str, Any]:
        """The labelled source: the known one (same label as before) or a newly numbered copy."""
        kind = self._kind(src)
        key = (kind, str(src["id"]))
        known = self._by_key.get(key)
        if known is not None:
            # Keep the label; remember the best relevance any query gave it.
            for score in ("relevance", "answerability"):
                if float(src.get(score) or 0) > float(known.get(score) or 0):
                    known[score] = src[score]
            return known
        self._counters[kind] += 1
        number = self._counters[kind]
        entry = labelled(src, kind, number, self.language)
        self._by_key[key] = entry
        return entry

    @property
    def sources(self) -> list[dict[str, Any]]:
        """All labelled sources, internal first, each kind in label order."""
        return sorted(
            self._by_key.values(), key=lambda s: (s.get("kind") == "web", int(s["number"]))
        )

    def of_kind(self, kind: SourceKind) -> list[dict[str, Any]]:
        return [s for s in self.sources if self._kind(s) == kind]


def registry_of(state: Mapping[str, Any]) -> SourceRegistry:
    """The run's source registry, continued from the sources already labelled."""
    return SourceRegistry(state.get("language", "en"), state.get("sources") or [])


@dataclass
class ToolOutcome:
    """What a tool call produced besides its text (the ``ToolMessage.artifact``)."""

    ok: bool
    # "ok", "bad_arguments" (the model can fix them), "unavailable" (the source cannot
    # answer this run: web disabled / not configured / provider down, store error) or "empty".
    status: str = "ok"
    sources: list[dict[str, Any]] = field(default_factory=list)
    search_cost: float = 0.0
    search_calls: int = 0
    pages_read: int = 0
    pages_failed: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str = ""
    web_fetched_at: str = ""
    web_status: str = ""  # google_search: the search's own status (WebFound.status)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _one_line(text: str) -> str:
    # One source per line: newlines inside a title could otherwise fake a new "[web-9]" line.
    return neutralise(re.sub(r"\s+", " ", text)).strip()


def _line(label: str, head: str, text: str, snippet_chars: int) -> str:
    """``[internal-1] title (where) — <source label="[internal-1]">snippet</source>``: the
    label first (what the model cites), the snippet in the one source fence."""
    snippet = fence(cut_snippet(text, snippet_chars), label, one_line=True)
    return f"{label} {_one_line(head)} — {snippet}"


def render_internal(
    sources: list[dict[str, Any]], query: str, snippet_chars: int, *, focus: str = ""
) -> str:
    """The KB hits, one per line; with ``focus`` (the turn's question) each passage shows
    the lines that match it, whole (``tools.answer.passage_focus``), not its first
    ``snippet_chars``."""
    lines = [f"Knowledge-base results for {_one_line(repr(query))}:"]
    for s in sources:
        title = s.get("heading") or s.get("title") or s.get("doc_id") or ""
        where = f" ({s.get('doc_id')}, {s['location']})" if s.get("location") else ""
        text = str(s.get("text") or "")
        if focus:
            text = focus_passage(text, focus, snippet_chars)
        lines.append(_line(s["label"], f"{title}{where}", text, snippet_chars))
    return "\n".join(lines)


def render_web(sources: list[dict[str, Any]], query: str, snippet_chars: int) -> str:
    lines = [f"Web results for {_one_line(repr(query))}:"]
    for s in sources:
        where = ", ".join(str(p) for p in (s.get("url"), s.get("published_at")) if p)
        head = f"{s.get('title') or ''} ({where})"
        lines.append(_line(s["label"], head, str(s.get("text") or ""), snippet_chars))
    return "\n".join(lines)


def validation_message(tool_name: str) -> Callable[[Any], str]:
    """A short 'which argument is wrong' sentence for the model instead of pydantic's dump
    (of a ``pydantic.ValidationError``: LangChain's type also admits pydantic v1's)."""

    def render(exc: ValidationError) -> str:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return f"Error: invalid arguments for {tool_name}: {problems}. Fix them and call again."

    return render


async def internal_search(
    service: SearchService,
    registry: SourceRegistry,
    query: str,
    *,
    question: str | None = None,
    top_k: int = 5,
    snippet_chars: int = 280,
    reranker: Reranker | None = None,
) -> tuple[str, dict[str, Any]]:
    """The ``internal_search`` tool's work: the model's text and the outcome artifact. With
    the turn's ``question``, the hits carry the answerability they are evidence of for it,
    as in the state graph (``SearchService.search_kb``)."""
    if not query.strip():
        return _fail("Error: internal_search needs a non-empty query.", status="bad_arguments")
    found = await service.search_kb([query], top_k, question=question, reranker=reranker)
    if found.status == "unavailable":
        return _fail(
            f"internal_search failed: the knowledge base is unavailable ({found.error}).",
            error=found.error,
        )
    if found.status == "empty":
        msg = "The knowledge base is empty (nothing has been ingested); it cannot help here."
        return _fail(msg, status="empty", error=found.error)
    if not found.sources:
        return f"No knowledge-base passage matches {query!r}.", ToolOutcome(ok=True).to_dict()
    labelled = [registry.add(src) for src in found.sources]
    text = render_internal(labelled, query, snippet_chars, focus=question or query)
    return text, ToolOutcome(ok=True, sources=labelled).to_dict()


async def google_search(
    service: SearchService,
    registry: SourceRegistry,
    query: str,
    hl: str | None = None,
    gl: str | None = None,
    *,
    top_k: int = 5,
    snippet_chars: int = 280,
) -> tuple[str, dict[str, Any]]:
    """The ``google_search`` tool's work: the model's text and the outcome artifact."""
    try:
        build_params(query, hl=hl, gl=gl)  # validate before spending anything
    except InputError as exc:
        return _fail(
            f"Error: google_search arguments rejected: {exc}. Fix them and call again.",
            status="bad_arguments",
        )
    found = await service.search_web([query], hl=hl, gl=gl, num=top_k, top_k=top_k)
    failure = web_failure(found)
    if failure is not None:
        return failure
    labelled = [registry.add(src) for src in found.sources]
    outcome = ToolOutcome(
        ok=True,
        sources=labelled,
        search_cost=found.cost,
        search_calls=found.calls,
        pages_read=found.pages_read,
        pages_failed=found.pages_failed,
        warnings=found.warnings,
        web_fetched_at=found.fetched_at,
        web_status=found.status,
    )
    edited = ""
    if found.edited:
        edited = f"The user edited this web search to: {', '.join(map(repr, found.queries))}.\n"
    searched = " | ".join(found.queries)
    if not labelled:
        return f"{edited}No web results for {searched!r}.", outcome.to_dict()
    return edited + render_web(labelled, searched, snippet_chars), outcome.to_dict()


def web_failure(found: WebFound) -> tuple[str, dict[str, Any]] | None:
    """A web search that gave no results to show, as the model's text and the outcome
    (None when it ran): what the model may do instead."""
    if found.status in ("disabled", "not_configured"):
        # The model may repeat this to the user: how to set the server up (variable names,
        # a pip install) is the log's and `hybrid-rag doctor`'s, never the model's text.
        told = WEB_NOT_AVAILABLE if names_setup(found.error) else found.error
        return _fail(
            f"google_search is not available: {told}. Use internal_search and tell the "
            "user that live web results were unavailable.",
            error=found.error,
            web_status=found.status,
        )
    if found.status == "skipped":
        return _fail(
            f"google_search was not run: {found.error}. Answer from internal_search "
            "results and tell the user that web search was skipped.",
            error=found.error,
            web_status=found.status,
        )
    if found.status == "failed":
        return _fail(
            f"google_search failed: {found.error}. You may retry once later or answer from "
            "internal_search results, saying live web results were unavailable.",
            error=found.error,
            calls=found.calls,
            web_status=found.status,
        )
    return None


def _fail(
    message: str,
    *,
    status: str = "unavailable",
    error: str = "",
    calls: int = 0,
    web_status: str = "",
) -> tuple[str, dict[str, Any]]:
    """The (text, artifact) pair of a failed call: the text for the model, ``error`` for people."""
    outcome = ToolOutcome(
        ok=False, status=status, error=error or message, search_calls=calls, web_status=web_status
    )
    return message, outcome.to_dict()

"""Web-search providers: their table, the base of an adapter, and registration.

A provider is one :class:`ProviderInfo` row (name, endpoint, the environment variables of
its key and base URL, list price) and, for an HTTP API, one :class:`Provider` adapter that
turns validated :class:`SearchParams` into one request and the JSON answer into
provider-neutral :class:`RawItem` rows (the client then cleans, dates, deduplicates and
ranks them). :func:`register_provider` adds both; the built-in ones register in
``adapters.py``. Everything else derives from this table: the settings read its
variables, the secrets scrubbed from traces, logs and errors are its keys
(``tools.websearch.web_settings.key_variables``), and ``auto`` tries providers in
registration order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .types import ResultKind, SearchParams
from .web_errors import WebSearchError, scrub


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """Static description of a provider (documentation and configuration)."""

    name: str
    endpoint: str
    auth: str
    params: str
    key_env: str | None
    base_url_env: str | None
    default_base_url: str | None
    price_usd: float


# The registry (filled by register_provider). ``auto`` picks the first of AUTO_ORDER whose
# key (or URL) is set.
PROVIDERS: dict[str, ProviderInfo] = {}
AUTO_ORDER: list[str] = []
DDGS_INSTALL_HINT = "pip install 'hybrid-rag[ddgs]'"


@dataclass(frozen=True, slots=True)
class RawItem:
    """One row as the provider gave it, before cleaning."""

    title: str
    url: str
    snippet: str
    date: str | None
    source: str
    kind: ResultKind
    position: float


@dataclass(slots=True)
class ParsedPage:
    items: list[RawItem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    partial: bool = False


@dataclass(frozen=True, slots=True)
class RequestSpec:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str | int] | None = None
    json: dict[str, Any] | None = None


def text_of(value: Any) -> str:
    return value if isinstance(value, str) else ""


def dict_of(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def rows_of(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def items_of(
    rows: list[dict[str, Any]],
    kind: ResultKind,
    *,
    url_keys: tuple[str, ...] = ("link", "url"),
    snippet_keys: tuple[str, ...] = ("snippet",),
    date_keys: tuple[str, ...] = ("date",),
    source: Callable[[dict[str, Any]], str] = lambda row: text_of(row.get("source")),
    start: int = 1,
) -> list[RawItem]:
    out = []
    for index, row in enumerate(rows, start=start):
        url = next((text_of(row.get(k)) for k in url_keys if text_of(row.get(k))), "")
        if not url:
            continue
        pos = row.get("position", row.get("rank", index))
        out.append(
            RawItem(
                title=text_of(row.get("title")),
                url=url,
                snippet=next(
                    (text_of(row.get(k)) for k in snippet_keys if text_of(row.get(k))), ""
                ),
                date=next((text_of(row.get(k)) for k in date_keys if text_of(row.get(k))), None),
                source=source(row),
                kind=kind,
                position=float(pos) if isinstance(pos, int | float) else float(index),
            )
        )
    return out


def error_text(body: Any, limit: int = 200, secrets: Iterable[str | None] = ()) -> str:
    """Best human-readable message from an error body of any provider, scrubbed of
    credentials before it is cut (a cut could leave half a secret no pattern matches)."""
    msg: Any = body
    if isinstance(body, dict):
        for path in (
            ("error", "message"),
            ("error", "detail"),
            ("error", "code"),
            ("detail", "error"),
            ("error",),
            ("message",),
            ("detail",),
        ):
            cur: Any = body
            for key in path:
                cur = cur.get(key) if isinstance(cur, dict) else None
            if isinstance(cur, str) and cur:
                msg = cur
                break
    text = scrub(" ".join(str(msg).split()), secrets)
    return text[:limit] + ("…" if len(text) > limit else "")


class Provider:
    """Base class: one HTTP provider."""

    info: ProviderInfo

    @property
    def name(self) -> str:
        return self.info.name

    def build(self, p: SearchParams, key: str | None, base_url: str) -> RequestSpec:
        raise NotImplementedError

    def parse(self, body: Any, p: SearchParams) -> ParsedPage:
        raise NotImplementedError

    def _err(self, cls: type[WebSearchError], reason: str, **kw: Any) -> WebSearchError:
        return cls(self.name, reason, **kw)


HTTP_PROVIDERS: dict[str, Provider] = {}


def register_provider(info: ProviderInfo, adapter: Provider | None, *, auto: bool = True) -> None:
    """Add a provider: its table row, the adapter speaking its HTTP API (None for one
    served by a library, such as ddgs), and whether ``auto`` may choose it (after the
    providers registered before it)."""
    if info.name in PROVIDERS:
        raise ValueError(f"web search provider {info.name!r} is registered already")
    if adapter is not None and adapter.info is not info:
        raise ValueError(f"the adapter of {info.name!r} describes {adapter.info.name!r}")
    PROVIDERS[info.name] = info
    if adapter is not None:
        HTTP_PROVIDERS[info.name] = adapter
    if auto:
        AUTO_ORDER.append(info.name)


def unregister_provider(name: str) -> None:
    """Remove a provider registered by :func:`register_provider` (tests, plugins)."""
    PROVIDERS.pop(name, None)
    HTTP_PROVIDERS.pop(name, None)
    if name in AUTO_ORDER:
        AUTO_ORDER.remove(name)


def valid_providers() -> tuple[str, ...]:
    """The names of the registered providers, in registration order."""
    return tuple(PROVIDERS)


# A provider choice's shape: a name, or a comma-separated failover list of names.
CHOICE_PATTERN = r"^ *[A-Za-z0-9_-]+ *(?:, *[A-Za-z0-9_-]+ *)*$"


def provider_choice_problem(value: str) -> str | None:
    """Why ``value`` is not a provider choice of the providers registered now ('auto',
    'none', a name, or a comma-separated failover list of names), or None."""
    names = [n.strip() for n in value.split(",")]
    choices = ("auto", "none", *valid_providers())
    if all(n in choices for n in names) and (len(names) == 1 or not {"auto", "none"} & set(names)):
        return None
    return (
        f"auto, none, one of {', '.join(valid_providers())}, or a comma-separated failover list "
        "of them"
    )

"""The built-in providers: their table rows, request builders and response parsers.

Each registers itself (``providers.register_provider``) in the order ``auto`` tries
them. Body-level errors (HTTP 200 with an error inside) are raised here as typed
:class:`WebSearchError`.

=========  ====================================  ===========================  ==========================================
provider   endpoint                              auth                         parameters (hl / gl / page mapping)
=========  ====================================  ===========================  ==========================================
serpbase   POST /google/search (/google/news)    ``X-API-Key``                q, hl, gl, page
serper     POST /search (/news)                  ``X-API-KEY``                q, hl, gl, num, page
serpapi    GET  /search.json                     ``api_key`` query param      engine=google, q, hl, gl, num, start=(page-1)*num, tbm=nws
scavio     POST /api/v2/google                   ``Authorization: Bearer``    query, hl, gl, start=(page-1)*10
tavily     POST /search                          ``Authorization: Bearer``    query, max_results, topic; no hl/gl/page (page emulated)
brave      GET  /res/v1/web/search (/news/..)    ``X-Subscription-Token``     q, search_lang=hl, country=gl, count=num, offset=page-1
searxng    GET  {SEARXNG_BASE_URL}/search        none (self-hosted)           q, format=json, language=hl, pageno=page, categories
ddgs       ``ddgs`` library (sync, in a thread)  none                         region=gl-lang, max_results=num, page
=========  ====================================  ===========================  ==========================================

Prices are rough list prices per call in USD (2025 public pricing pages, entry
plans); they only feed the cost *estimate* and can be overridden through
``WebSearchSettings.prices`` or ``WEBSEARCH_PRICE_<NAME>`` environment variables.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, ClassVar

from .providers import (
    DDGS_INSTALL_HINT,
    ParsedPage,
    Provider,
    ProviderInfo,
    RawItem,
    RequestSpec,
    dict_of,
    error_text,
    items_of,
    register_provider,
    rows_of,
    text_of,
)
from .types import ResultKind, SearchParams
from .web_errors import (
    WebSearchAuthError,
    WebSearchDependencyError,
    WebSearchError,
    WebSearchProviderError,
    WebSearchRateLimitError,
    WebSearchTimeoutError,
)

BUILT_IN: dict[str, ProviderInfo] = {
    "serpbase": ProviderInfo(
        "serpbase", "POST /google/search, /google/news", "X-API-Key", "q, hl, gl, page",
        "SERPBASE_API_KEY", "SERPBASE_BASE_URL", "https://api.serpbase.dev", 0.0003,
    ),
    "serper": ProviderInfo(
        "serper", "POST /search, /news", "X-API-KEY", "q, hl, gl, num, page",
        "SERPER_API_KEY", "SERPER_BASE_URL", "https://google.serper.dev", 0.001,
    ),
    "serpapi": ProviderInfo(
        "serpapi", "GET /search.json", "api_key query parameter",
        "engine, q, hl, gl, num, start", "SERPAPI_API_KEY", "SERPAPI_BASE_URL",
        "https://serpapi.com", 0.015,
    ),
    "scavio": ProviderInfo(
        "scavio", "POST /api/v2/google", "Authorization: Bearer", "query, hl, gl, start",
        "SCAVIO_API_KEY", "SCAVIO_BASE_URL", "https://api.scavio.dev", 0.002,
    ),
    "tavily": ProviderInfo(
        "tavily", "POST /search", "Authorization: Bearer", "query, max_results, topic",
        "TAVILY_API_KEY", "TAVILY_BASE_URL", "https://api.tavily.com", 0.008,
    ),
    "brave": ProviderInfo(
        "brave", "GET /res/v1/web/search, /res/v1/news/search", "X-Subscription-Token",
        "q, search_lang, country, count, offset", "BRAVE_API_KEY", "BRAVE_BASE_URL",
        "https://api.search.brave.com", 0.005,
    ),
    "searxng": ProviderInfo(
        "searxng", "GET /search?format=json", "none", "q, language, pageno, categories",
        None, "SEARXNG_BASE_URL", None, 0.0,
    ),
    "ddgs": ProviderInfo(
        "ddgs", "ddgs.DDGS().text()/.news()", "none", "region, max_results, page",
        None, None, None, 0.0,
    ),
}  # fmt: skip


class SerpBase(Provider):
    info = BUILT_IN["serpbase"]
    # Business status codes sent with HTTP 200 (serpbase-skill references/api.md).
    _AUTH: ClassVar[frozenset[int]] = frozenset({1001, 1002, 1003})
    _QUOTA: ClassVar[frozenset[int]] = frozenset({1020})
    _RATE: ClassVar[frozenset[int]] = frozenset({1029})
    _RETRY: ClassVar[frozenset[int]] = frozenset({1500, 1502, 1503, 1504})

    def build(self, p: SearchParams, key: str | None, base_url: str) -> RequestSpec:
        path = "/google/news" if p.news else "/google/search"
        return RequestSpec(
            "POST",
            base_url + path,
            {"X-API-Key": key or ""},
            json={"q": p.query, "hl": p.hl, "gl": p.gl, "page": p.page},
        )

    def parse(self, body: Any, p: SearchParams) -> ParsedPage:
        status = body.get("status", 0)
        if status not in (0, None, "0", "ok", "success"):
            msg = f"status {status}: {error_text(body)}"
            code = status if isinstance(status, int) else -1
            if code in self._AUTH:
                raise self._err(WebSearchAuthError, msg)
            if code in self._QUOTA:
                raise self._err(WebSearchRateLimitError, msg)
            if code in self._RATE:
                raise self._err(WebSearchRateLimitError, msg, retryable=True)
            raise self._err(WebSearchProviderError, msg, retryable=code in self._RETRY)
        # Some clients see results nested under "search".
        nested = body.get("search") if isinstance(body.get("search"), dict) else {}
        organic = rows_of(body.get("organic")) or rows_of(nested.get("organic"))
        news = rows_of(body.get("news")) or rows_of(nested.get("news"))
        page = ParsedPage(items_of(organic, "organic"))
        page.items += items_of(news, "news", date_keys=("published_at", "time", "date"))
        return page


class Serper(Provider):
    info = BUILT_IN["serper"]

    def build(self, p: SearchParams, key: str | None, base_url: str) -> RequestSpec:
        path = "/news" if p.news else "/search"
        body = {"q": p.query, "hl": p.hl, "gl": p.gl, "num": p.num, "page": p.page}
        return RequestSpec("POST", base_url + path, {"X-API-KEY": key or ""}, json=body)

    def parse(self, body: Any, p: SearchParams) -> ParsedPage:
        code = body.get("statusCode")
        if isinstance(code, int) and code >= 400:
            cls = WebSearchAuthError if code in (401, 403) else WebSearchProviderError
            raise self._err(cls, f"statusCode {code}: {error_text(body)}")
        page = ParsedPage(items_of(rows_of(body.get("organic")), "organic"))
        page.items += items_of(rows_of(body.get("topStories")), "top_story")
        page.items += items_of(rows_of(body.get("news")), "news")
        return page


def _google_style(body: dict[str, Any]) -> ParsedPage:
    """SerpApi-shaped bodies (also Scavio v2, a SERP passthrough)."""
    page = ParsedPage(items_of(rows_of(body.get("organic_results")), "organic"))
    page.items += items_of(rows_of(body.get("top_stories")), "top_story")
    page.items += items_of(
        rows_of(body.get("news_results")),
        "news",
        source=lambda r: text_of(r.get("source")) or text_of(dict_of(r.get("source")).get("name")),
    )
    return page


class SerpApi(Provider):
    info = BUILT_IN["serpapi"]

    def build(self, p: SearchParams, key: str | None, base_url: str) -> RequestSpec:
        params: dict[str, str | int] = {
            "engine": "google",
            "q": p.query,
            "hl": p.hl,
            "gl": p.gl,
            "num": p.num,
            "start": (p.page - 1) * p.num,
            "api_key": key or "",
        }
        if p.news:
            params["tbm"] = "nws"
        return RequestSpec("GET", base_url + "/search.json", params=params)

    def parse(self, body: Any, p: SearchParams) -> ParsedPage:
        error = body.get("error")
        if isinstance(error, str) and error:
            if "hasn't returned any results" in error:
                return ParsedPage()  # an empty result page, not a failure
            low = error.lower()
            if "api key" in low:
                raise self._err(WebSearchAuthError, error_text(body))
            if "run out" in low or "limit" in low:
                raise self._err(WebSearchRateLimitError, error_text(body))
            raise self._err(WebSearchProviderError, error_text(body))
        return _google_style(body)


class Scavio(Provider):
    info = BUILT_IN["scavio"]

    def build(self, p: SearchParams, key: str | None, base_url: str) -> RequestSpec:
        body: dict[str, Any] = {"query": p.query, "hl": p.hl, "gl": p.gl}
        if p.page > 1:
            body["start"] = (p.page - 1) * 10
        return RequestSpec(
            "POST", base_url + "/api/v2/google", {"Authorization": f"Bearer {key}"}, json=body
        )

    def parse(self, body: Any, p: SearchParams) -> ParsedPage:
        if body.get("error"):
            err = body["error"]
            code = text_of(err.get("code")) if isinstance(err, dict) else ""
            cls: type[WebSearchError] = WebSearchProviderError
            if code == "unauthorized":
                cls = WebSearchAuthError
            elif code in ("rate_limit_exceeded", "insufficient_credits"):
                cls = WebSearchRateLimitError
            raise self._err(cls, error_text(body))
        page = _google_style(body)
        if p.news:
            page.warnings.append("scavio: no news endpoint; returned web results")
        return page


class Tavily(Provider):
    info = BUILT_IN["tavily"]
    _MAX = 20

    def build(self, p: SearchParams, key: str | None, base_url: str) -> RequestSpec:
        # No pagination: ask for page*num results (capped) and slice in parse().
        body = {
            "query": p.query,
            "max_results": min(p.page * p.num, self._MAX),
            "topic": "news" if p.news else "general",
        }
        return RequestSpec(
            "POST", base_url + "/search", {"Authorization": f"Bearer {key}"}, json=body
        )

    def parse(self, body: Any, p: SearchParams) -> ParsedPage:
        if "results" not in body and body.get("detail"):
            raise self._err(WebSearchProviderError, error_text(body))
        rows = rows_of(body.get("results"))[(p.page - 1) * p.num : p.page * p.num]
        kind: ResultKind = "news" if p.news else "organic"
        page = ParsedPage(
            items_of(rows, kind, url_keys=("url",), snippet_keys=("content",),
                   date_keys=("published_date",))
        )  # fmt: skip
        if p.page * p.num > self._MAX:
            page.warnings.append(f"tavily: no pagination beyond {self._MAX} results")
        return page


class Brave(Provider):
    info = BUILT_IN["brave"]
    _LANG: ClassVar[dict[str, str]] = {"zh-cn": "zh-hans", "zh-sg": "zh-hans", "zh-tw": "zh-hant", "zh-hk": "zh-hant",
             "pt-br": "pt-br", "en-gb": "en-gb"}  # fmt: skip

    def build(self, p: SearchParams, key: str | None, base_url: str) -> RequestSpec:
        path = "/res/v1/news/search" if p.news else "/res/v1/web/search"
        lang = self._LANG.get(p.hl.lower(), p.hl.split("-")[0].lower())
        params: dict[str, str | int] = {
            "q": p.query,
            "country": p.gl,
            "search_lang": lang,
            "count": min(p.num, 20),
            "offset": min(p.page - 1, 9),  # Brave's offset counts pages, max 9
        }
        headers = {"X-Subscription-Token": key or "", "Accept": "application/json"}
        return RequestSpec("GET", base_url + path, headers, params=params)

    @staticmethod
    def _source(row: dict[str, Any]) -> str:
        return text_of(dict_of(row.get("profile")).get("name")) or text_of(
            dict_of(row.get("meta_url")).get("hostname")
        )

    def _rows_of(self, rows: Any, kind: ResultKind) -> list[RawItem]:
        return items_of(
            rows_of(rows),
            kind,
            url_keys=("url",),
            snippet_keys=("description",),
            date_keys=("page_age", "age"),
            source=self._source,
        )

    def parse(self, body: Any, p: SearchParams) -> ParsedPage:
        if body.get("type") == "ErrorResponse":
            code = text_of(dict_of(body.get("error")).get("code"))
            if "TOKEN" in code or "AUTH" in code:
                raise self._err(WebSearchAuthError, error_text(body))
            if "RATE" in code:
                raise self._err(WebSearchRateLimitError, error_text(body), retryable=True)
            raise self._err(WebSearchProviderError, error_text(body))
        if p.news:  # the news endpoint returns a top-level "results" list
            return ParsedPage(self._rows_of(body.get("results"), "news"))
        page = ParsedPage(self._rows_of(dict_of(body.get("web")).get("results"), "organic"))
        page.items += self._rows_of(dict_of(body.get("news")).get("results"), "top_story")
        return page


class SearXNG(Provider):
    info = BUILT_IN["searxng"]

    def build(self, p: SearchParams, key: str | None, base_url: str) -> RequestSpec:
        params: dict[str, str | int] = {
            "q": p.query,
            "format": "json",
            "language": p.hl,
            "pageno": p.page,
        }
        if p.news:
            params["categories"] = "news"
        return RequestSpec("GET", base_url + "/search", params=params)

    def parse(self, body: Any, p: SearchParams) -> ParsedPage:
        rows = rows_of(body.get("results"))
        dead = [
            f"{e[0]} ({e[1]})" if isinstance(e, list) and len(e) > 1 else str(e)
            for e in body.get("unresponsive_engines") or []
        ]
        if dead and not rows:
            # Soft outage: HTTP 200 with nothing but failed engines. Not retried
            # here (engines are usually suspended for minutes); failover instead.
            raise self._err(WebSearchProviderError, "no results; unresponsive engines: "
                            + ", ".join(dead))  # fmt: skip
        page = ParsedPage()
        for index, row in enumerate(rows, start=1):
            kind: ResultKind = "news" if p.news or row.get("category") == "news" else "organic"
            page.items += items_of([row], kind, url_keys=("url",), snippet_keys=("content",),
                                 date_keys=("publishedDate", "pubdate"), start=index)  # fmt: skip
        if dead:
            page.partial = True
            page.warnings.append("searxng partial outage; unresponsive engines: " + ", ".join(dead))
        return page


# Paid Google-SERP APIs first (best quality per call), then answer-oriented APIs, then the
# self-hosted metasearch. ddgs is never chosen automatically: it is unofficial and
# rate-limited, so it must be named explicitly.
for _adapter in (SerpBase(), Serper(), SerpApi(), Scavio(), Tavily(), Brave(), SearXNG()):
    register_provider(_adapter.info, _adapter)
register_provider(BUILT_IN["ddgs"], None, auto=False)


def load_ddgs() -> Any:
    """Import the optional ``ddgs`` package lazily (it is an extra)."""
    try:
        return importlib.import_module("ddgs")
    except ImportError:
        raise WebSearchDependencyError(
            "ddgs", f"the 'ddgs' package is not installed: {DDGS_INSTALL_HINT}"
        ) from None


def ddgs_search(p: SearchParams, timeout: float) -> ParsedPage:
    """Blocking DuckDuckGo search through ``ddgs`` (run it in a worker thread)."""
    module = load_ddgs()
    region = f"{p.gl}-{p.hl.split('-')[0].lower()}"
    try:
        engine = module.DDGS(timeout=max(1, int(timeout)))
        call: Callable[..., Any] = engine.news if p.news else engine.text
        rows = call(p.query, region=region, max_results=p.num, page=p.page)
    except Exception as exc:  # ddgs raises its own hierarchy; map by class name
        name = type(exc).__name__
        msg = f"{name}: {exc}"
        if "Ratelimit" in name:
            raise WebSearchRateLimitError("ddgs", msg, retryable=True) from None
        if "Timeout" in name:
            raise WebSearchTimeoutError("ddgs", msg, retryable=True) from None
        raise WebSearchProviderError("ddgs", msg) from None
    rows = rows_of(rows)
    if p.news:
        return ParsedPage(items_of(rows, "news", url_keys=("url", "href"), snippet_keys=("body",)))
    return ParsedPage(items_of(rows, "organic", url_keys=("href", "url"), snippet_keys=("body",)))

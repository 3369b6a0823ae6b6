"""Each provider against the local server: request shape in, normalised results out."""

from __future__ import annotations

import sys
import types
from typing import Any, ClassVar

import pytest

from tools.websearch import (
    SearchCache,
    WebSearchClient,
    WebSearchDependencyError,
    WebSearchSettings,
)

from .conftest import SENTINEL, LocalServer, Reply, load, make_settings


async def _search(settings: WebSearchSettings, query: str, **kw: Any) -> Any:
    async with WebSearchClient(settings, cache=SearchCache()) as client:
        return await client.search(query, **kw)


async def test_serpbase_post_with_header_and_body(server: LocalServer) -> None:
    server.route("/google/search", Reply(load("serpbase.json")))
    resp = await _search(make_settings(server, "serpbase"), "rust tokio", page=2)
    req = server.hits("/google/search")[0]
    assert req.method == "POST"
    assert req.headers["x-api-key"] == SENTINEL
    assert req.body == {"q": "rust tokio", "hl": "en", "gl": "us", "page": 2}
    assert [r.url for r in resp.results] == [
        "https://tokio.rs",
        "https://tokio.rs/tokio/tutorial",  # utm_source and fragment dropped
        "https://crates.io/crates/tokio",
    ]
    assert [r.rank for r in resp.results] == [1, 2, 3]
    first = resp.results[0]
    assert (first.provider, first.kind, first.source) == ("serpbase", "organic", "tokio.rs")
    assert resp.calls == 1 and resp.cost > 0 and not resp.cache_hit


async def test_serpbase_nested_and_news(server: LocalServer) -> None:
    server.route("/google/search", Reply(load("serpbase_nested.json")))
    server.route("/google/news", Reply(load("serpbase_news.json")))
    settings = make_settings(server, "serpbase")
    nested = await _search(settings, "nested")
    assert nested.results[0].url == "https://nested.example.org/a"
    news = await _search(settings, "rust release", news=True)
    assert [r.kind for r in news.results] == ["news", "news"]
    assert news.results[0].published_at == "2026-03-01T08:00:00+00:00"
    assert news.results[1].published_at is not None  # "2天前" resolved against fetch time
    assert news.results[1].source == "示例科技"


async def test_serper_dedups_top_story_and_keeps_date(server: LocalServer) -> None:
    server.route("/search", Reply(load("serper.json")))
    resp = await _search(make_settings(server, "serper"), "zig language", num=5)
    req = server.hits("/search")[0]
    assert req.headers["x-api-key"] == SENTINEL
    assert req.body == {"q": "zig language", "hl": "en", "gl": "us", "num": 5, "page": 1}
    urls = [r.url for r in resp.results]
    assert urls.count("https://ziglang.org") == 1  # fbclid variant of organic[0] removed
    assert [r.kind for r in resp.results] == ["organic", "organic", "top_story"]
    assert resp.results[0].published_at == "2026-02-03T00:00:00+00:00"


async def test_serpapi_get_with_key_in_query(server: LocalServer) -> None:
    server.route("/search.json", Reply(load("serpapi.json")))
    resp = await _search(make_settings(server, "serpapi"), "elixir phoenix", page=3, num=10)
    req = server.hits("/search.json")[0]
    assert req.method == "GET"
    assert req.query["api_key"] == SENTINEL
    assert (req.query["engine"], req.query["q"], req.query["start"]) == (
        "google",
        "elixir phoenix",
        "20",
    )
    assert (req.query["hl"], req.query["gl"], req.query["num"]) == ("en", "us", "10")
    assert resp.results[0].source == "Phoenix"
    assert resp.results[-1].kind == "top_story"


async def test_scavio_bearer(server: LocalServer) -> None:
    server.route("/api/v2/google", Reply(load("scavio.json")))
    resp = await _search(make_settings(server, "scavio"), "kotlin", hl="de", gl="de")
    req = server.hits("/api/v2/google")[0]
    assert req.headers["authorization"] == f"Bearer {SENTINEL}"
    assert req.body == {"query": "kotlin", "hl": "de", "gl": "de"}
    assert len(resp.results) == 3


async def test_tavily_no_hl_gl_and_rfc1123_dates(server: LocalServer) -> None:
    server.route("/search", Reply(load("tavily.json")))
    resp = await _search(make_settings(server, "tavily"), "deno 3 release", num=2, news=True)
    req = server.hits("/search")[0]
    assert req.headers["authorization"] == f"Bearer {SENTINEL}"
    assert req.body == {"query": "deno 3 release", "max_results": 2, "topic": "news"}
    assert resp.results[0].published_at == "2026-02-03T10:15:00+00:00"
    assert resp.results[0].snippet.startswith("Deno 3 ships with & improved")


async def test_brave_get_params_and_html_description(server: LocalServer) -> None:
    server.route("/res/v1/web/search", Reply(load("brave.json")))
    resp = await _search(
        make_settings(server, "brave"), "ocaml", hl="zh-CN", gl="tw", page=2, num=5
    )
    req = server.hits("/res/v1/web/search")[0]
    assert req.headers["x-subscription-token"] == SENTINEL
    assert req.query == {"q": "ocaml", "country": "tw", "search_lang": "zh-hans",
                         "count": "5", "offset": "1"}  # fmt: skip
    first = resp.results[0]
    assert first.snippet == "OCaml is an industrial-strength functional language & more."
    assert first.source == "OCaml"
    assert first.published_at == "2025-11-02T08:30:00+00:00"
    assert resp.results[1].published_at == "2025-06-01T00:00:00+00:00"  # from "age"
    assert resp.results[-1].kind == "top_story"


async def test_searxng_results_and_news_category(server: LocalServer) -> None:
    server.route("/search", Reply(load("searxng.json")))
    resp = await _search(make_settings(server, "searxng"), "haskell")
    req = server.hits("/search")[0]
    assert req.query == {"q": "haskell", "format": "json", "language": "en", "pageno": "1"}
    assert "authorization" not in req.headers
    assert [r.url for r in resp.results] == [
        "https://www.haskell.org",
        "https://www.haskell.org?ghcup",
        "https://news.example.com/ghc-10",
    ]
    assert resp.results[2].kind == "news"
    assert resp.results[2].published_at == "2026-02-14T09:30:00+00:00"
    assert not resp.partial


class _FakeDDGS:
    """Stand-in for ``ddgs.DDGS`` (the package is optional and needs the network)."""

    calls: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []

    def __init__(self, timeout: int = 5) -> None:
        self.timeout = timeout

    def text(self, query: str, **kw: Any) -> list[dict[str, Any]]:
        self.calls.append(("text", query, kw))
        return list(load("ddgs.json")["text"])

    def news(self, query: str, **kw: Any) -> list[dict[str, Any]]:
        self.calls.append(("news", query, kw))
        return list(load("ddgs.json")["news"])


async def test_ddgs_with_fake_module(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("ddgs")
    module.DDGS = _FakeDDGS  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ddgs", module)
    _FakeDDGS.calls.clear()
    settings = WebSearchSettings(provider="ddgs")
    resp = await _search(settings, "lua", num=2)
    news = await _search(settings, "lua", news=True, hl="zh-CN", gl="cn")
    assert _FakeDDGS.calls[0] == ("text", "lua", {"region": "us-en", "max_results": 2, "page": 1})
    assert _FakeDDGS.calls[1][2]["region"] == "cn-zh"
    assert [r.url for r in resp.results] == [
        "https://www.lua.org",
        "https://en.wikipedia.org/wiki/Lua_(programming_language)",
    ]
    assert resp.cost == 0.0
    assert news.results[0].kind == "news"
    assert news.results[0].published_at == "2026-01-11T07:45:00+00:00"


async def test_ddgs_missing_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ddgs", None)  # makes "import ddgs" fail
    with pytest.raises(WebSearchDependencyError, match=r"pip install 'hybrid-rag\[ddgs\]'"):
        await _search(WebSearchSettings(provider="ddgs"), "lua")

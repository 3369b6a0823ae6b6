"""Failure classes, retries, failover and secret hygiene against the local server."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tools.websearch import (
    SearchCache,
    WebSearchAuthError,
    WebSearchClient,
    WebSearchError,
    WebSearchFailoverError,
    WebSearchNetworkError,
    WebSearchNotConfiguredError,
    WebSearchProviderError,
    WebSearchRateLimitError,
    WebSearchSettings,
    WebSearchTimeoutError,
)

from .conftest import SENTINEL, LocalServer, Reply, load, make_settings

ERR = load("errors.json")


class SleepRecorder:
    """Records requested backoff delays without waiting them out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def _search(settings: WebSearchSettings, query: str = "q", **kw: Any) -> Any:
    sleep = kw.pop("sleep", None)
    async with WebSearchClient(settings, cache=SearchCache(), sleep=sleep) as client:
        return await client.search(query, **kw)


async def test_timeout_is_retried_then_typed(server: LocalServer) -> None:
    server.route("/search", Reply(load("serper.json"), delay=0.5))
    settings = make_settings(server, "serper", timeout=0.1, max_attempts=2)
    with pytest.raises(WebSearchTimeoutError) as info:
        await _search(settings)
    assert info.value.provider == "serper"
    assert "no answer within" in info.value.reason
    assert len(server.hits("/search")) == 2
    assert info.value.calls == 2


@pytest.mark.parametrize("status", [401, 403, 422])
async def test_auth_errors_are_not_retried(server: LocalServer, status: int) -> None:
    server.route("/search", Reply(ERR["serper_forbidden"], status=status))
    with pytest.raises(WebSearchAuthError, match=f"HTTP {status}: Unauthorized"):
        await _search(make_settings(server, "serper"))
    assert len(server.hits("/search")) == 1


async def test_429_honours_retry_after_capped(server: LocalServer) -> None:
    server.route(
        "/search",
        Reply(ERR["tavily_rate"], status=429, headers={"Retry-After": "0.15"}),
        Reply(load("tavily.json")),
    )
    sleep = SleepRecorder()
    resp = await _search(make_settings(server, "tavily"), sleep=sleep)
    assert sleep.delays == [0.15]
    assert resp.calls == 2 and len(resp.results) == 2
    # A Retry-After above the cap is cut to the cap (0.2 s in test settings).
    server.route(
        "/search",
        Reply(ERR["tavily_rate"], status=429, headers={"Retry-After": "30"}),
        Reply(load("tavily.json")),
    )
    sleep = SleepRecorder()
    await _search(make_settings(server, "tavily"), "other", sleep=sleep)
    assert sleep.delays == [0.2]


async def test_429_without_retry_after_backs_off_then_gives_up(server: LocalServer) -> None:
    server.route("/search", Reply(ERR["tavily_rate"], status=429))
    sleep = SleepRecorder()
    with pytest.raises(WebSearchRateLimitError, match="gave up after 3 attempts") as info:
        await _search(make_settings(server, "tavily"), sleep=sleep)
    assert "Rate limit exceeded" in str(info.value)
    assert len(server.hits("/search")) == 3
    # Exponential with jitter: attempt 2 waits in [0.005, 0.01], attempt 3 in [0.01, 0.02].
    assert 0.005 <= sleep.delays[0] <= 0.01 <= sleep.delays[1] <= 0.02


async def test_retry_after_beyond_budget_fails_fast(server: LocalServer) -> None:
    server.route("/search", Reply(ERR["tavily_rate"], status=429, headers={"Retry-After": "60"}))
    settings = make_settings(server, "tavily", retry_after_cap=60.0, time_budget=1.0)
    with pytest.raises(WebSearchRateLimitError, match="exceed the time budget"):
        await _search(settings)
    assert len(server.hits("/search")) == 1


async def test_500_then_success(server: LocalServer) -> None:
    server.route("/search", Reply("oops", status=500), Reply(load("serper.json")))
    resp = await _search(make_settings(server, "serper"))
    assert resp.calls == 2
    assert resp.results[0].url == "https://ziglang.org"


async def test_invalid_json(server: LocalServer) -> None:
    server.route("/search", Reply("<html>captive portal</html>"))
    with pytest.raises(WebSearchProviderError, match="invalid JSON"):
        await _search(make_settings(server, "serper"))


@pytest.mark.parametrize(
    ("body", "exc", "fragment", "requests"),
    [
        ("serpbase_unauthorized", WebSearchAuthError, "status 1001: unauthorized", 1),
        ("serpbase_credits", WebSearchRateLimitError, "insufficient credits", 1),
        ("serpbase_rate", WebSearchRateLimitError, "rate limited", 3),
        ("serpbase_upstream", WebSearchProviderError, "upstream unavailable", 3),
    ],
)
async def test_http_200_error_bodies(
    server: LocalServer, body: str, exc: type[WebSearchError], fragment: str, requests: int
) -> None:
    server.route("/google/search", Reply(ERR[body]))
    with pytest.raises(exc, match=fragment):
        await _search(make_settings(server, "serpbase"))
    assert len(server.hits("/google/search")) == requests


async def test_brave_and_serpapi_error_bodies(server: LocalServer) -> None:
    server.route("/res/v1/web/search", Reply(ERR["brave_bad_token"], status=422))
    with pytest.raises(WebSearchAuthError, match="subscription token is invalid"):
        await _search(make_settings(server, "brave"))
    server.route("/search.json", Reply(ERR["serpapi_bad_key"], status=401))
    with pytest.raises(WebSearchAuthError, match="Invalid API key"):
        await _search(make_settings(server, "serpapi"))


async def test_searxng_partial_outage_is_warning(server: LocalServer) -> None:
    server.route("/search", Reply(load("searxng_partial.json")))
    resp = await _search(make_settings(server, "searxng"))
    assert resp.partial
    assert len(resp.results) == 1
    assert any("brave (Suspended: too many requests)" in w for w in resp.warnings)


async def test_searxng_full_outage_is_error(server: LocalServer) -> None:
    server.route("/search", Reply(load("searxng_outage.json")))
    with pytest.raises(WebSearchProviderError, match="unresponsive engines: duckduckgo"):
        await _search(make_settings(server, "searxng"))


async def test_failover_to_next_provider_records_failure(server: LocalServer) -> None:
    server.route("/google/search", Reply(ERR["serpbase_unauthorized"]))
    server.route("/search", Reply(load("searxng.json")))
    resp = await _search(make_settings(server, "serpbase,searxng"))
    assert resp.provider == "searxng"
    assert resp.failed_providers == ("serpbase",)
    assert any("serpbase failed: WebSearchAuthError" in w for w in resp.warnings)
    assert resp.calls == 2


async def test_failover_all_fail(server: LocalServer) -> None:
    server.route("/google/search", Reply(ERR["serpbase_unauthorized"]))
    server.route("/search", Reply(load("searxng_outage.json")))
    with pytest.raises(WebSearchFailoverError) as info:
        await _search(make_settings(server, "serpbase,searxng"))
    assert [type(e) for e in info.value.errors] == [WebSearchAuthError, WebSearchProviderError]
    assert "serpbase" in str(info.value) and "searxng" in str(info.value)


async def test_network_error_is_typed() -> None:
    # Port 9 (discard) on localhost is closed on these machines: connection refused.
    settings = WebSearchSettings(
        provider="serper", api_keys={"serper": SENTINEL}, base_urls={"serper": "http://127.0.0.1:9"},
        max_attempts=2, backoff_base=0.0,
    )  # fmt: skip
    with pytest.raises((WebSearchNetworkError, WebSearchTimeoutError)) as info:
        await _search(settings)
    assert SENTINEL not in str(info.value)


async def test_not_configured_is_clear() -> None:
    with pytest.raises(WebSearchNotConfiguredError, match="web search not configured: set one of"):
        await _search(WebSearchSettings.from_env({}))
    with pytest.raises(WebSearchNotConfiguredError, match="serper needs SERPER_API_KEY"):
        await _search(WebSearchSettings.from_env({}, provider="serper"))


async def test_sentinel_key_never_in_errors_or_logs(
    server: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    # SerpApi: key travels in the URL, so httpx logs and errors could leak it.
    server.route("/search.json", Reply({"error": f"bad key {SENTINEL}"}, status=500))
    with pytest.raises(WebSearchProviderError) as info:
        await _search(make_settings(server, "serpapi"))
    texts += [str(info.value), info.value.reason, repr(info.value)]
    server.route("/search", Reply({"message": f"key {SENTINEL} rejected"}, status=403))
    with pytest.raises(WebSearchAuthError) as auth:
        await _search(make_settings(server, "serper"))
    texts += [str(auth.value)]
    settings = make_settings(server, "serpapi", timeout=0.1, max_attempts=1)
    server.route("/search.json", Reply({}, delay=0.4))
    with pytest.raises(WebSearchTimeoutError) as timeout:
        await _search(settings)
    texts += [str(timeout.value), str(timeout.value.__cause__)]
    assert any("/search.json" in r.getMessage() for r in caplog.records)  # httpx did log
    joined = "\n".join(texts) + caplog.text
    assert SENTINEL not in joined
    assert "api_key=***" in caplog.text

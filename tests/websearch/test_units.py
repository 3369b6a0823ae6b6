"""Pure functions: URLs, dates, snippets, parameters, settings, merging."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tools.errors import ConfigError, InputError
from tools.websearch import (
    UnknownProviderError,
    WebResult,
    WebSearchSettings,
    build_params,
    clean_snippet,
    normalize_url,
    parse_date,
    parse_retry_after,
)
from tools.websearch.results import merge_ranked
from tools.websearch.web_errors import scrub

NOW = datetime(2026, 3, 10, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTPS://Docs.Python.org:443/3/library/", "https://docs.python.org/3/library"),
        ("http://example.com:80/a#frag", "http://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("https://www.python.org/", "https://www.python.org"),
        ("https://www.python.org", "https://www.python.org"),
        ("https://x.org/p?utm_source=a&b=2&a=1&gclid=z&fbclid=y", "https://x.org/p?a=1&b=2"),
        ("https://x.org/p?UTM_Campaign=q&msclkid=1", "https://x.org/p"),
        ("https://www.python.org/?downloads", "https://www.python.org?downloads"),
        ("not a url", "not a url"),
    ],
)
def test_normalize_url(raw: str, expected: str) -> None:
    assert normalize_url(raw) == expected


def test_normalize_url_dedups_fragment_variants() -> None:
    a = normalize_url("https://docs.python.org/3/library/asyncio-task.html#coroutines")
    b = normalize_url("https://docs.python.org/3/library/asyncio-task.html")
    assert a == b


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2024-10-27T00:00:00.0000000", "2024-10-27T00:00:00+00:00"),
        ("2024-10-28T07:15:00.0000000Z", "2024-10-28T07:15:00+00:00"),
        ("2024-05-02T17:40:05", "2024-05-02T17:40:05+00:00"),
        ("2026-09-09T19:02:00Z", "2026-09-09T19:02:00+00:00"),
        ("2024-03-31T09:31:00+08:00", "2024-03-31T01:31:00+00:00"),
        ("2024-03-31", "2024-03-31T00:00:00+00:00"),
        ("Thu, 20 Nov 2025 14:30:00 GMT", "2025-11-20T14:30:00+00:00"),
        ("Mon, 17 Nov 2025 09:05:12 +0100", "2025-11-17T08:05:12+00:00"),
        ("Jan 29, 2023", "2023-01-29T00:00:00+00:00"),
        ("September 9, 2023", "2023-09-09T00:00:00+00:00"),
        ("29 Jan 2023", "2023-01-29T00:00:00+00:00"),
        ("2024年5月2日", "2024-05-02T00:00:00+00:00"),
        ("2024年12月31日 08:30", "2024-12-31T08:30:00+00:00"),
        ("3 hours ago", "2026-03-10T09:00:00+00:00"),
        ("2 days ago", "2026-03-08T12:00:00+00:00"),
        ("1 week ago", "2026-03-03T12:00:00+00:00"),
        ("an hour ago", "2026-03-10T11:00:00+00:00"),
        ("10 minutes ago", "2026-03-10T11:50:00+00:00"),
        ("yesterday", "2026-03-09T12:00:00+00:00"),
        ("3天前", "2026-03-07T12:00:00+00:00"),
        ("5小时前", "2026-03-10T07:00:00+00:00"),
        ("10分钟前", "2026-03-10T11:50:00+00:00"),
        ("2周前", "2026-02-24T12:00:00+00:00"),
        ("昨天", "2026-03-09T12:00:00+00:00"),
        ("前天", "2026-03-08T12:00:00+00:00"),
        ("not a date", None),
        ("", None),
        (None, None),
        ("2024年13月40日", None),
    ],
)
def test_parse_date(raw: str | None, expected: str | None) -> None:
    assert parse_date(raw, NOW) == expected


def test_snippet_strips_html_and_entities() -> None:
    raw = "The <strong>Python</strong>   &amp; <em>friends</em>\n home &lt;b&gt;x&lt;/b&gt; a < b"
    assert clean_snippet(raw) == "The Python & friends home x a < b"


def test_snippet_cut_at_word_boundary_with_ellipsis() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta"
    out = clean_snippet(text, 24)
    assert out == "alpha beta gamma delta…"
    assert len(out) <= 24


def test_snippet_cut_cjk_at_character_boundary() -> None:
    text = "苹果公司在发布会上推出了新的产品线，包括手机、电脑和耳机等多个品类。"
    out = clean_snippet(text, 20)
    assert len(out) == 20
    assert out.endswith("…")
    assert out[:19] == text[:19]


def test_snippet_short_text_unchanged() -> None:
    assert clean_snippet("short one", 280) == "short one"


def test_params_defaults_from_query_language() -> None:
    en = build_params("  latest   python release ")
    zh = build_params("最新的 Python 版本")
    assert (en.query, en.hl, en.gl) == ("latest python release", "en", "us")
    assert (zh.hl, zh.gl) == ("zh-CN", "cn")
    assert build_params("x", hl="zh-cn", gl="TW").hl == "zh-CN"
    assert build_params("x", hl="zh-cn", gl="TW").gl == "tw"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"query": "   "}, "empty"),
        ({"query": "q", "hl": "english"}, "invalid hl"),
        ({"query": "q", "gl": "usa"}, "invalid gl"),
        ({"query": "q", "page": 0}, "invalid page"),
        ({"query": "q", "num": 500}, "invalid num"),
    ],
)
def test_params_validation(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        build_params(**kwargs)  # type: ignore[arg-type]


def test_settings_from_env_auto_order_and_describe_hides_keys() -> None:
    env = {"TAVILY_API_KEY": "tvly-secret-999", "SERPER_API_KEY": "serper-secret-888",
           "SERPER_BASE_URL": "http://127.0.0.1:9/", "WEBSEARCH_PRICE_SERPER": "0.5"}  # fmt: skip
    s = WebSearchSettings.from_env(env)
    assert s.chain() == ("serper",)  # serper precedes tavily in AUTO_ORDER
    assert s.base_url("serper") == "http://127.0.0.1:9"
    assert s.price("serper") == 0.5
    text = repr(s) + repr(s.describe())
    assert "secret" not in text
    assert s.describe()["configured"] == ["serper", "tavily"]


def test_settings_failover_list_skips_unconfigured() -> None:
    s = WebSearchSettings.from_env({"SEARXNG_BASE_URL": "http://127.0.0.1:9"},
                                   provider="serper, searxng")  # fmt: skip
    assert s.chain() == ("searxng",)
    assert s.skipped() == ("serper",)
    assert s.is_configured


def test_settings_not_configured() -> None:
    s = WebSearchSettings.from_env({})
    assert not s.is_configured
    assert "SERPER_API_KEY" in s.missing_message()


def test_unknown_provider_is_config_error_listing_valid_ones() -> None:
    with pytest.raises(UnknownProviderError) as info:
        WebSearchSettings.from_env({}, provider="bing")
    assert isinstance(info.value, ConfigError)
    assert "'bing'" in str(info.value)
    assert "serper" in str(info.value) and "searxng" in str(info.value)


def test_scrub_removes_keys_and_url_params() -> None:
    text = "GET http://h/search.json?q=x&api_key=abc123xyz failed; Bearer tok.en-1; sk-SENTINEL-123"
    out = scrub(text, ["sk-SENTINEL-123"])
    assert "abc123xyz" not in out and "tok.en-1" not in out and "SENTINEL" not in out


def test_parse_retry_after() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Tue, 10 Mar 2026 12:00:30 GMT", NOW) == 30.0
    assert parse_retry_after("garbage") is None
    assert parse_retry_after(None) is None


def _r(url: str, rank: int, date: str | None = None) -> WebResult:
    return WebResult(
        "t", url, "s", date, "src", "serper", rank, "organic", "2026-01-01T00:00:00+00:00"
    )


def test_merge_ranked_dedups_keeps_best_rank_and_reranks() -> None:
    a = [_r("https://a.org", 1), _r("https://b.org", 2), _r("https://c.org", 3)]
    b = [_r("https://c.org", 1, "2026-01-02T00:00:00+00:00"), _r("https://d.org", 2)]
    merged = merge_ranked([a, b], top_k=3)
    assert [r.url for r in merged] == ["https://c.org", "https://a.org", "https://b.org"]
    assert [r.rank for r in merged] == [1, 2, 3]
    assert merged[0].published_at == "2026-01-02T00:00:00+00:00"

"""The ``websearch`` sub-command and the synchronous helper."""

from __future__ import annotations

import argparse
import json

import pytest

from cli import websearch_command
from tools.websearch import SearchCache, WebSearchNotConfiguredError, search_sync, set_default_cache

from .conftest import SENTINEL, LocalServer, Reply, load, make_settings


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    websearch_command.register(parser.add_subparsers())
    return parser.parse_args(argv)


@pytest.fixture(autouse=True)
def _fresh_default_cache() -> None:
    set_default_cache(SearchCache())


def test_cli_prints_results_from_env_configured_provider(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in ("SERPBASE_API_KEY", "SERPAPI_API_KEY", "SCAVIO_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SERPER_API_KEY", SENTINEL)
    monkeypatch.setenv("SERPER_BASE_URL", server.url)
    server.route("/search", Reply(load("serper.json")))
    args = _parse(["websearch", "zig language", "--num", "2", "--hl", "en", "--gl", "us"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert " 1. Home ⚡ Zig Programming Language" in out
    assert "https://ziglang.org" in out and "2026-02-03T00:00:00+00:00" in out
    assert SENTINEL not in out
    args = _parse(["websearch", "zig json", "--json", "--provider", "serper"])
    assert args.func(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["provider"] == "serper" and data["results"][0]["rank"] == 1


def test_cli_not_configured_raises_project_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SERPBASE_API_KEY", "SERPER_API_KEY", "SERPAPI_API_KEY", "SCAVIO_API_KEY",
                "TAVILY_API_KEY", "BRAVE_API_KEY", "SEARXNG_BASE_URL", "WEBSEARCH_PROVIDER"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    args = _parse(["websearch", "anything"])
    with pytest.raises(WebSearchNotConfiguredError, match="set one of SERPBASE_API_KEY"):
        args.func(args)


def test_search_sync(server: LocalServer) -> None:
    server.route("/search", Reply(load("serper.json")))
    resp = search_sync("zig", settings=make_settings(server, "serper"), cache=SearchCache())
    assert resp.results[0].rank == 1
    assert server.hits("/search")[0].headers["x-api-key"] == SENTINEL

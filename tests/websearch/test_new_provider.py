"""Adding a provider is one registration: its key is then read from the environment and
scrubbed from errors, logs and traces without editing any list by hand."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from run.tracing import REDACTED, redact_secrets, secret_env_vars, secret_values
from tests.local_provider import LocalServer, Reply
from tools.websearch import (
    PROVIDERS,
    ProviderInfo,
    SearchCache,
    WebSearchClient,
    WebSearchError,
    WebSearchSettings,
    register_provider,
    unregister_provider,
)
from tools.websearch.providers import ParsedPage, Provider, RequestSpec, items_of, rows_of
from tools.websearch.types import SearchParams
from tools.websearch.web_settings import environment_variables, key_variables

KEY = "acme-SENTINEL-key-424242"
INFO = ProviderInfo(
    "acme", "GET /find", "key query parameter", "q", "ACME_API_KEY", "ACME_BASE_URL",
    "https://acme.invalid", 0.001,
)  # fmt: skip


class Acme(Provider):
    """A provider that carries its key in the URL (as SerpApi does), so httpx logs it."""

    info = INFO

    def build(self, p: SearchParams, key: str | None, base_url: str) -> RequestSpec:
        return RequestSpec("GET", f"{base_url}/find", params={"q": p.query, "key": key or ""})

    def parse(self, body: Any, p: SearchParams) -> ParsedPage:
        return ParsedPage(items_of(rows_of(body.get("results")), "organic"))


@pytest.fixture
def acme() -> Iterator[None]:
    register_provider(INFO, Acme())
    try:
        yield
    finally:
        unregister_provider("acme")


def test_a_registered_provider_is_configured_from_its_table_row(acme: None) -> None:
    assert "ACME_API_KEY" in key_variables() and "ACME_API_KEY" in secret_env_vars()
    assert {"ACME_BASE_URL", "WEBSEARCH_PRICE_ACME"} <= set(environment_variables())
    settings = WebSearchSettings.from_env({"ACME_API_KEY": KEY, "WEBSEARCH_PROVIDER": "acme"})
    assert settings.chain() == ("acme",) and KEY in settings.secrets()


def test_a_provider_registered_after_import_is_selectable_in_the_context(acme: None) -> None:
    """Issue 32 item 4: the context's provider check was a pattern frozen when
    run/context.py was imported, so a provider registered later could not be chosen."""
    from dataclasses import fields

    from run.context import Context
    from tools.errors import ConfigError

    assert Context(search_provider="acme").search_provider == "acme"
    assert Context(search_provider="serper, acme").search_provider == "serper, acme"
    with pytest.raises(ConfigError, match=r"search_provider must be .*acme.*got 'nope'"):
        Context(search_provider="nope")
    description = next(f for f in fields(Context) if f.name == "search_provider").metadata
    builtins = [n for n in PROVIDERS if n != "acme"]
    assert all(name in description["description"] for name in builtins)  # from the table


def test_unregistering_removes_the_provider() -> None:
    register_provider(INFO, Acme())
    unregister_provider("acme")
    assert "acme" not in PROVIDERS and "ACME_API_KEY" not in key_variables()


def test_a_new_providers_key_is_scrubbed_from_errors_logs_and_traces(
    acme: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("ACME_API_KEY", KEY)
    with LocalServer() as srv:
        srv.route("/find", Reply({"message": f"key {KEY} is revoked"}, status=401))
        monkeypatch.setenv("ACME_BASE_URL", srv.url)
        settings = WebSearchSettings.from_env(provider="acme", max_attempts=1)

        async def search() -> None:
            async with WebSearchClient(settings, cache=SearchCache()) as client:
                await client.search("python release")

        with pytest.raises(WebSearchError) as failure:
            asyncio.run(search())
        assert srv.hits("/find")[0].query["key"] == KEY  # the key did reach the provider
    assert KEY not in str(failure.value) and KEY not in repr(failure.value)  # errors
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "HTTP Request: GET" in logged and KEY not in logged  # logs (httpx's URL line)
    assert KEY in secret_values()  # traces: the redacting LangSmith client scrubs it
    assert redact_secrets({"outputs": [f"echoed {KEY}"]}) == {"outputs": [f"echoed {REDACTED}"]}

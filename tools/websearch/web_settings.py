"""Web-search configuration, built from the environment when asked (never at import)."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from tools.errors import ConfigError

from .providers import AUTO_ORDER, DDGS_INSTALL_HINT, PROVIDERS, valid_providers
from .web_errors import UnknownProviderError

ENV_PROVIDER = "WEBSEARCH_PROVIDER"
ENV_PRICE_PREFIX = "WEBSEARCH_PRICE_"


def key_variables() -> tuple[str, ...]:
    """The environment variables holding the registered providers' keys: the secrets to
    scrub from traces, logs and errors (one list, derived from the provider table)."""
    return tuple(info.key_env for info in PROVIDERS.values() if info.key_env)


def environment_variables() -> tuple[str, ...]:
    """Every environment variable :meth:`WebSearchSettings.from_env` reads."""
    names = [ENV_PROVIDER]
    for name, info in PROVIDERS.items():
        names += [v for v in (info.key_env, info.base_url_env) if v]
        names.append(ENV_PRICE_PREFIX + name.upper())
    return tuple(names)


def _split(spec: str) -> tuple[str, ...]:
    return tuple(p.strip().lower() for p in spec.split(",") if p.strip())


def url_credentials(url: str) -> tuple[str, ...]:
    """The password of ``url`` (``scheme://user:password@host``) in every form it travels
    in: as written, URL-decoded, the ``user:password`` pair, and its base64 in the
    Basic-auth header httpx derives from it. Empty when the URL carries no password."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return ()
    if not password:
        return ()
    user, secret = unquote(parts.username or ""), unquote(password)
    basic = base64.b64encode(f"{user}:{secret}".encode()).decode()
    return tuple(dict.fromkeys((f"{user}:{secret}", password, secret, basic)))


@dataclass(frozen=True)
class WebSearchSettings:
    """Provider choice, credentials, endpoints, prices and retry policy.

    ``provider`` is a name, ``"auto"`` (the first provider of
    :data:`~tools.websearch.providers.AUTO_ORDER` with a key/URL set) or an
    ordered failover list such as ``"serper,searxng"``. ``api_keys`` is hidden
    from ``repr`` and :meth:`describe`.
    """

    provider: str = "auto"
    api_keys: Mapping[str, str] = field(default_factory=dict, repr=False)
    base_urls: Mapping[str, str] = field(default_factory=dict)
    prices: Mapping[str, float] = field(default_factory=dict)
    timeout: float = 10.0  # per HTTP request, seconds
    max_attempts: int = 3  # per provider, first try included
    backoff_base: float = 0.5  # first retry waits 0.5x..1x this, doubling each time
    backoff_max: float = 8.0
    retry_after_cap: float = 30.0  # never sleep longer than this for Retry-After
    time_budget: float = 30.0  # total seconds per provider, retries included
    snippet_chars: int = 280
    max_concurrency: int = 4  # search_many parallelism

    def __post_init__(self) -> None:
        names = _split(self.provider or "auto")
        if not names:
            raise ConfigError("web search provider is empty")
        for name in names:
            if name != "auto" and name not in PROVIDERS:
                raise UnknownProviderError(name, valid_providers())
        if "auto" in names and len(names) > 1:
            raise ConfigError("'auto' cannot be part of a failover list")
        for key in (*self.api_keys, *self.base_urls, *self.prices):
            if key not in PROVIDERS:
                raise UnknownProviderError(key, valid_providers())
        for label, value in (("timeout", self.timeout), ("time_budget", self.time_budget)):
            if value <= 0:
                raise ConfigError(f"web search {label} must be positive, got {value!r}")
        if self.max_attempts < 1 or self.max_concurrency < 1 or self.snippet_chars < 20:
            raise ConfigError(
                "web search max_attempts and max_concurrency must be >= 1, snippet_chars >= 20"
            )
        if self.backoff_base < 0 or self.backoff_max < 0 or self.retry_after_cap < 0:
            raise ConfigError("web search backoff values must not be negative")
        object.__setattr__(self, "provider", ",".join(names))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> WebSearchSettings:
        """Read keys, base URLs, prices and provider from ``env`` (default ``os.environ``).

        Keyword overrides win; ``provider=None`` falls back to ``$WEBSEARCH_PROVIDER``
        then ``"auto"``.
        """
        env = os.environ if env is None else env
        keys = {
            name: env[info.key_env].strip()
            for name, info in PROVIDERS.items()
            if info.key_env and env.get(info.key_env, "").strip()
        }
        urls = {
            name: env[info.base_url_env].strip()
            for name, info in PROVIDERS.items()
            if info.base_url_env and env.get(info.base_url_env, "").strip()
        }
        prices: dict[str, float] = {}
        for name in PROVIDERS:
            raw = env.get(ENV_PRICE_PREFIX + name.upper())
            if raw:
                try:
                    prices[name] = float(raw)
                except ValueError:
                    raise ConfigError(
                        f"{ENV_PRICE_PREFIX}{name.upper()} must be a number, got {raw!r}"
                    ) from None
        overrides = {k: v for k, v in overrides.items() if v is not None}
        provider = overrides.pop("provider", None) or env.get(ENV_PROVIDER) or "auto"
        keys.update(overrides.pop("api_keys", {}))
        urls.update(overrides.pop("base_urls", {}))
        prices.update(overrides.pop("prices", {}))
        return cls(provider=provider, api_keys=keys, base_urls=urls, prices=prices, **overrides)

    # -- resolution ------------------------------------------------------
    def usable(self, name: str) -> bool:
        """Whether ``name`` has what it needs (a key, a URL, or nothing for ddgs)."""
        if name == "ddgs":
            return True  # the package itself is checked when searching
        if name == "searxng":
            return bool(self.base_urls.get("searxng"))
        return bool(self.api_keys.get(name))

    def requested(self) -> tuple[str, ...]:
        return _split(self.provider)

    def chain(self) -> tuple[str, ...]:
        """Providers to try, in order, that are configured."""
        names = self.requested()
        if names == ("auto",):
            first = next((n for n in AUTO_ORDER if self.usable(n)), None)
            return (first,) if first else ()
        return tuple(n for n in names if self.usable(n))

    def skipped(self) -> tuple[str, ...]:
        """Explicitly requested providers that are missing their key or URL."""
        return tuple(n for n in self.requested() if n != "auto" and not self.usable(n))

    @property
    def is_configured(self) -> bool:
        return bool(self.chain())

    def missing_message(self) -> str:
        names = self.requested()
        if names == ("auto",):
            needed = [PROVIDERS[n].key_env or PROVIDERS[n].base_url_env for n in AUTO_ORDER]
            return (
                f"set one of {', '.join(str(n) for n in needed)} "
                f"(or use provider 'ddgs' after {DDGS_INSTALL_HINT})"
            )
        parts = [
            f"{n} needs {PROVIDERS[n].key_env or PROVIDERS[n].base_url_env}" for n in self.skipped()
        ]
        return "; ".join(parts) or "no provider selected"

    def base_url(self, name: str) -> str:
        url = self.base_urls.get(name) or PROVIDERS[name].default_base_url or ""
        return url.rstrip("/")

    def price(self, name: str) -> float:
        return float(self.prices.get(name, PROVIDERS[name].price_usd))

    def secrets(self) -> tuple[str, ...]:
        """Every credential to scrub from error text (keys and URL passwords)."""
        out = [v for v in self.api_keys.values() if v]
        for url in self.base_urls.values():
            out += url_credentials(url)
        return tuple(dict.fromkeys(out))

    def describe(self) -> dict[str, Any]:
        """Configuration summary without secrets (for logs and "not configured" notes)."""

        def safe(url: str) -> str:
            parts = urlsplit(url)
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
            return f"{parts.scheme}://{host}{port}{parts.path}"

        return {
            "provider": self.provider,
            "chain": list(self.chain()),
            "configured": [n for n in valid_providers() if n != "ddgs" and self.usable(n)],
            "skipped": list(self.skipped()),
            "base_urls": {n: safe(self.base_url(n)) for n in self.chain() if self.base_url(n)},
            "prices_usd": {n: self.price(n) for n in self.chain()},
            "timeout": self.timeout,
            "max_attempts": self.max_attempts,
            "time_budget": self.time_budget,
            "snippet_chars": self.snippet_chars,
        }

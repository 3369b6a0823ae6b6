"""Typed web-search errors.

Every failure of a search is a :class:`WebSearchError` carrying ``provider`` and
``reason``. Its text names both and never contains a secret: :func:`scrub` is the one
place credentials are removed, from every error and log line built from a provider's URL
or answer. It redacts the configured secrets by value (keys, a URL's password and the
base64 ``user:password`` of its Basic-auth header, see ``WebSearchSettings.secrets``) and,
by pattern, whatever else looks like a credential: ``user:password@`` in URLs,
``Authorization``/``Basic``/``Bearer`` values (a provider may echo the request's headers)
and ``api_key=``/``key=``/``token=``/``password=``-style parameters (httpx error messages
may embed the request URL, and SerpApi takes its key in the URL).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tools.errors import ConfigError, HybridRagError

REDACTED = "***"

# Query parameters and headers that commonly carry credentials ("api_key=…",
# "X-API-Key: …", '"token": "…"').
_SECRET_PARAM = re.compile(
    r"(?i)\b(api[_-]?key|apikey|key|token|access_token|subscription[_-]?token|x-api-key"
    r"|password|passwd|pwd|client_secret|secret)"
    r"([\"']?\s*(?:=|:)\s*[\"']?)([^&\s\"',;]+)"
)
# An echoed Authorization header, whatever its scheme ("Authorization: Basic dXNlcjpwYXNz",
# '"authorization": "Token abc"').
_AUTHORIZATION = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:[A-Za-z-]+\s+)?[^\s\"',;]+"
)
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+")
# "Basic dXNlcjpwYXNz" (base64 of user:password) outside a header line.
_BASIC = re.compile(r"(?i)\bbasic\s+[A-Za-z0-9+/]{6,}={0,2}")
# user:password@ (or user@) in URLs (a SearXNG base URL behind basic auth).
_URL_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@", re.I)


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove every known secret and credential-looking value from ``text``."""
    # Longest first: a password must not be redacted inside its own base64 form's match.
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        # Very short values would redact ordinary words; real keys are long.
        if len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _AUTHORIZATION.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _SECRET_PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BASIC.sub(f"Basic {REDACTED}", text)
    return _BEARER.sub(f"Bearer {REDACTED}", text)


class WebSearchError(HybridRagError):
    """Base class of web-search failures.

    ``retryable`` and ``retry_after`` drive the retry loop; ``calls`` counts the
    upstream requests spent before giving up (for cost reporting).
    """

    def __init__(
        self,
        provider: str,
        reason: str,
        *,
        secrets: Iterable[str | None] = (),
        retryable: bool = False,
        retry_after: float | None = None,
        calls: int = 0,
    ) -> None:
        self.provider = provider
        self.reason = scrub(reason, secrets)
        self.retryable = retryable
        self.retry_after = retry_after
        self.calls = calls
        super().__init__(self._text())

    def _text(self) -> str:
        return f"web search failed ({self.provider}): {self.reason}"

    def redact(self, secrets: Iterable[str | None]) -> WebSearchError:
        """Scrub ``secrets`` from the reason in place; return self for chaining."""
        self.reason = scrub(self.reason, secrets)
        self.args = (self._text(),)
        return self


class WebSearchNotConfiguredError(WebSearchError, ConfigError):
    """No usable provider: no key or URL is set for the selected provider(s)."""

    def _text(self) -> str:
        return f"web search not configured: {self.reason}"


class UnknownProviderError(ConfigError):
    """A provider name that this package does not know."""

    def __init__(self, name: str, valid: Iterable[str]) -> None:
        self.provider = name
        self.valid = tuple(valid)
        super().__init__(
            f"unknown web search provider {name!r}; valid providers: "
            f"{', '.join(self.valid)}, or 'auto', or a comma-separated failover list"
        )


class WebSearchDependencyError(WebSearchError, ConfigError):
    """An optional package needed by the provider is not installed."""


class WebSearchAuthError(WebSearchError):
    """The provider rejected the credentials (401/403/422, or an auth error body)."""


class WebSearchRateLimitError(WebSearchError):
    """Rate limit or plan quota exhausted (after retries, when retrying made sense)."""


class WebSearchTimeoutError(WebSearchError):
    """The provider did not answer within the per-request timeout or time budget."""


class WebSearchNetworkError(WebSearchError):
    """Connection-level failure (DNS, refused, reset) that persisted across retries."""


class WebSearchProviderError(WebSearchError):
    """The provider answered but the answer is unusable: error body, bad JSON, 4xx/5xx."""


class WebSearchFailoverError(WebSearchError):
    """Every provider of a failover list failed; ``errors`` holds each failure in order."""

    def __init__(self, errors: list[WebSearchError]) -> None:
        self.errors = list(errors)
        reason = "all providers failed: " + "; ".join(
            f"{e.provider}: {type(e).__name__}: {e.reason}" for e in self.errors
        )
        super().__init__(
            ",".join(e.provider for e in self.errors),
            reason,
            calls=sum(e.calls for e in self.errors),
        )

    def redact(self, secrets: Iterable[str | None]) -> WebSearchError:
        secrets = tuple(secrets)
        for err in self.errors:
            err.redact(secrets)
        return super().redact(secrets)

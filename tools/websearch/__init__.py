"""Live web search: many providers behind one normalised, cached, async API.

Typical use::

    settings = WebSearchSettings.from_env(provider="auto")
    async with WebSearchClient(settings, cache=default_cache()) as client:
        resp = await client.search("query", hl=None, gl=None, page=1, num=10)
        multi = await client.search_many(["q1", "q2"], top_k=5)

Nothing here reads the environment or touches the network at import time.
"""

from . import adapters  # noqa: F401  (registers the built-in providers)
from .approval import (
    MAX_EDITED_QUERIES,
    SKIPPED_BY_USER,
    WebSearchDecision,
    approval_request,
)
from .cache import (
    CacheStats,
    SearchCache,
    cache_key,
    default_cache,
    set_default_cache,
    shared_from_env,
)
from .client import WebSearchClient, search_sync
from .dates import parse_date, parse_datetime
from .providers import (
    AUTO_ORDER,
    PROVIDERS,
    ProviderInfo,
    register_provider,
    unregister_provider,
    valid_providers,
)
from .shared_cache import RedisSharedCache, SharedCacheUnavailable
from .snippets import build_params, clean_snippet, default_locale
from .transport import parse_retry_after
from .types import MultiSearchResponse, ResultKind, SearchParams, SearchResponse, WebResult
from .urls import normalize_url
from .web_errors import (
    UnknownProviderError,
    WebSearchAuthError,
    WebSearchDependencyError,
    WebSearchError,
    WebSearchFailoverError,
    WebSearchNetworkError,
    WebSearchNotConfiguredError,
    WebSearchProviderError,
    WebSearchRateLimitError,
    WebSearchTimeoutError,
)
from .web_settings import WebSearchSettings

__all__ = [
    "AUTO_ORDER",
    "MAX_EDITED_QUERIES",
    "PROVIDERS",
    "SKIPPED_BY_USER",
    "CacheStats",
    "MultiSearchResponse",
    "ProviderInfo",
    "RedisSharedCache",
    "ResultKind",
    "SearchCache",
    "SearchParams",
    "SearchResponse",
    "SharedCacheUnavailable",
    "UnknownProviderError",
    "WebResult",
    "WebSearchAuthError",
    "WebSearchClient",
    "WebSearchDecision",
    "WebSearchDependencyError",
    "WebSearchError",
    "WebSearchFailoverError",
    "WebSearchNetworkError",
    "WebSearchNotConfiguredError",
    "WebSearchProviderError",
    "WebSearchRateLimitError",
    "WebSearchSettings",
    "WebSearchTimeoutError",
    "approval_request",
    "build_params",
    "cache_key",
    "clean_snippet",
    "default_cache",
    "default_locale",
    "normalize_url",
    "parse_date",
    "parse_datetime",
    "parse_retry_after",
    "register_provider",
    "search_sync",
    "set_default_cache",
    "shared_from_env",
    "unregister_provider",
    "valid_providers",
]

"""URL normalisation used as the deduplication and citation key."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

# Parameters that identify a click or campaign, never the page itself.
TRACKING_PARAMS: frozenset[str] = frozenset(
    {
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "fbclid",
        "msclkid",
        "yclid",
        "igshid",
        "mc_cid",
        "mc_eid",
        "_ga",
        "_gl",
        "_hsenc",
        "_hsmi",
        "mkt_tok",
        "ref_src",
        "srsltid",
        "spm",
    }
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _is_tracking(name: str) -> bool:
    name = name.lower()
    return name.startswith("utm_") or name in TRACKING_PARAMS


def normalize_url(url: str) -> str:
    """Return a canonical form of ``url`` for deduplication.

    Lower-cases scheme and host, drops the default port, the fragment, tracking
    parameters (``utm_*``, ``gclid``, ``fbclid``...) and a trailing slash, and
    sorts the remaining query parameters. Query parts are kept verbatim (no
    re-encoding) so ``?downloads`` stays ``?downloads``. Non-HTTP strings are
    returned stripped but otherwise unchanged.
    """
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return url
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    if parts.username is not None:
        userinfo = parts.username + (f":{parts.password}" if parts.password else "")
        host = f"{userinfo}@{host}"
    path = parts.path.rstrip("/")
    pairs = [p for p in parts.query.split("&") if p]
    kept = [p for p in pairs if not _is_tracking(unquote(p.split("=", 1)[0]))]
    query = "&".join(sorted(kept))
    return urlunsplit((scheme, host, path, query, ""))


def site_of(url: str) -> str:
    """Host name without ``www.``, used as the source when a provider names none."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return ""
    return host.removeprefix("www.")

"""Fetch the pages behind web results, safely: a fetched page is untrusted input from an
address someone else chose.

* Only ``http``/``https``, and only to public addresses: the host name is resolved and
  *every* address it resolves to must be global (no loopback, private, link-local,
  shared, reserved or multicast address, IPv4-mapped forms included). The request is
  then sent to the address that was checked (``Host`` header and TLS server name kept),
  so a second DNS answer cannot swap in an internal address (DNS rebinding).
* Redirects are followed by hand, at most ``max_redirects``, each hop checked like the
  first; robots.txt of each origin is read (and cached) before its pages.
* One time limit for the whole fetch (robots.txt, redirects, a slow body), a byte limit
  read as the body streams (the declared length is not trusted), and only HTML.
* ``HYBRID_RAG_PAGES_ALLOW_HOSTS`` (comma-separated host names, for tests on loopback)
  exempts hosts *as written in the URL* from the public-address rule; nothing else can.

Successful fetches are cached (``PageCache``, a TTL cache like the search cache's);
failures are not. What the page says is turned into passages by ``page_passages``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

import httpx
from cachetools import TTLCache

from tools.errors import ConfigError

ENV_ALLOW_HOSTS = "HYBRID_RAG_PAGES_ALLOW_HOSTS"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
USER_AGENT = "hybrid-rag-page-reader/1.0"
ROBOTS_MAX_BYTES = 500_000  # RFC 9309: crawlers must read at least 500 KiB


class PageError(Exception):
    """Why one page could not be read (a reason for the run's warnings); ``status`` is
    the HTTP status that refused it, 0 for any other reason."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class PageSettings:
    """Limits of one page fetch (the defaults are the product's)."""

    timeout_s: float = 8.0  # the whole fetch: robots.txt, redirects and body
    max_bytes: int = 2_000_000
    max_redirects: int = 3
    user_agent: str = USER_AGENT
    allow_hosts: frozenset[str] = frozenset()  # tests only: hosts exempt from the IP rule

    def __post_init__(self) -> None:
        if not 0 < self.timeout_s <= 120:
            raise ConfigError(f"page timeout must be in (0, 120] seconds, got {self.timeout_s}")
        if not 1_000 <= self.max_bytes <= 50_000_000:
            raise ConfigError(f"page max_bytes must be in [1000, 5e7], got {self.max_bytes}")
        if not 0 <= self.max_redirects <= 10:
            raise ConfigError(f"page max_redirects must be in [0, 10], got {self.max_redirects}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PageSettings:
        env = os.environ if environ is None else environ
        hosts = env.get(ENV_ALLOW_HOSTS, "")
        return cls(allow_hosts=frozenset(h.strip().lower() for h in hosts.split(",") if h.strip()))


@dataclass(frozen=True)
class Page:
    """A fetched HTML page: the URL it was read from (after redirects), its bytes and the
    charset its ``Content-Type`` header declared ("" when none)."""

    url: str
    html: bytes
    charset: str = ""


def declared_charset(content_type: str) -> str:
    """The ``charset`` parameter of a ``Content-Type`` header value, lower-cased."""
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'").lower()
    return ""


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class _Target:
    """Where to send a request for ``url``: the checked address, or the URL itself."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    extensions: dict[str, str] = field(default_factory=dict)


async def check_target(url: str, settings: PageSettings) -> _Target:
    """The request for ``url`` pinned to a checked public address, or PageError."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise PageError(f"malformed URL ({exc})") from exc
    if parts.scheme not in ("http", "https"):
        raise PageError(f"only http and https pages are read, not {parts.scheme or 'no'} scheme")
    host = (parts.hostname or "").lower()
    if not host:
        raise PageError("URL has no host")
    if host in settings.allow_hosts:
        return _Target(url)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise PageError(f"cannot resolve {host} ({exc})") from exc
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    blocked = [a for a in addresses if not _public(a)]
    if blocked or not addresses:
        raise PageError(
            f"{host} resolves to a non-public address ({blocked[0] if blocked else '-'})"
        )
    ip = addresses[0]
    literal = f"[{ip}]" if ip.version == 6 else str(ip)
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    pinned = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return _Target(pinned, {"Host": parts.netloc.rsplit("@", 1)[-1]}, extensions)


class PageCache:
    """Fetched pages and robots.txt rules by URL / origin, for ``ttl_s`` seconds."""

    def __init__(
        self, maxsize: int = 500, ttl_s: float = 600.0, robots_maxsize: int | None = None
    ) -> None:
        self._pages: TTLCache[str, Page] = TTLCache(maxsize=maxsize, ttl=ttl_s)
        self._robots: TTLCache[str, RobotFileParser] = TTLCache(
            maxsize=robots_maxsize or maxsize, ttl=ttl_s * 6
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def page(self, url: str) -> Page | None:
        with self._lock:
            found = self._pages.get(url)
            self.hits += found is not None
            self.misses += found is None
            return found

    def put_page(self, url: str, page: Page) -> None:
        with self._lock:
            self._pages[url] = page

    def robots(self, origin: str) -> RobotFileParser | None:
        with self._lock:
            return self._robots.get(origin)

    def put_robots(self, origin: str, rules: RobotFileParser) -> None:
        with self._lock:
            self._robots[origin] = rules

    def clear(self) -> None:
        with self._lock:
            self._pages.clear()
            self._robots.clear()


_default: PageCache | None = None
_default_lock = threading.Lock()


def default_page_cache() -> PageCache:
    """The process's page cache (shared by both graphs, like the search cache)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = PageCache()
        return _default


async def _get(
    client: httpx.AsyncClient, url: str, settings: PageSettings, limit: int, *, html: bool = True
) -> tuple[httpx.Response, bytes]:
    """One GET to a checked address, the body read up to ``limit`` bytes (PageError past it)."""
    target = await check_target(url, settings)
    request = client.build_request(
        "GET",
        target.url,
        headers={"User-Agent": settings.user_agent, **target.headers},
        extensions=dict(target.extensions),
    )
    response = await client.send(request, stream=True, follow_redirects=False)
    try:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise PageError(f"page is larger than {limit} bytes ({declared} declared)")
        if response.is_redirect or response.status_code != 200:
            return response, b""
        ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if html and ctype not in HTML_TYPES:
            raise PageError(f"not an HTML page ({ctype or 'no content type'})")
        body = bytearray()
        async for piece in response.aiter_bytes():
            body += piece
            if len(body) > limit:
                raise PageError(f"page is larger than {limit} bytes")
        return response, bytes(body)
    finally:
        await response.aclose()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}".lower()


async def _robots(
    client: httpx.AsyncClient, url: str, settings: PageSettings, cache: PageCache
) -> RobotFileParser:
    """The origin's robots.txt rules (RFC 9309: missing or 4xx = no rules, a server
    error or no answer = everything disallowed)."""
    origin = _origin(url)
    rules = cache.robots(origin)
    if rules is not None:
        return rules
    rules = RobotFileParser()
    try:
        response, body = await _get(
            client, origin + "/robots.txt", settings, ROBOTS_MAX_BYTES, html=False
        )
        status = response.status_code
    except (httpx.HTTPError, PageError):
        status = 503
    if status == 200:
        rules.parse(body.decode("utf-8", "replace").splitlines())
    elif status >= 500:
        rules.parse(["User-agent: *", "Disallow: /"])
    else:
        rules.parse([])  # 3xx/4xx: no usable rules, crawling allowed
    cache.put_robots(origin, rules)
    return rules


async def fetch_page(
    client: httpx.AsyncClient,
    url: str,
    settings: PageSettings,
    cache: PageCache,
    *,
    html: bool = True,
) -> tuple[Page, bool]:
    """The page at ``url`` (and whether it came from the cache), or PageError. ``html``
    False accepts any content type (a sitemap)."""
    cached = cache.page(url)
    if cached is not None:
        return cached, True
    try:
        async with asyncio.timeout(settings.timeout_s):
            current = url
            for _ in range(settings.max_redirects + 1):  # bounded: each hop re-checked
                await check_target(current, settings)  # before its robots.txt is asked
                rules = await _robots(client, current, settings, cache)
                if not rules.can_fetch(settings.user_agent, current):
                    raise PageError("robots.txt disallows it")
                response, body = await _get(
                    client, current, settings, settings.max_bytes, html=html
                )
                if response.is_redirect:
                    current = urljoin(current, response.headers.get("location", ""))
                    continue
                if response.status_code != 200:
                    raise PageError(f"HTTP {response.status_code}", response.status_code)
                page = Page(
                    current, body, declared_charset(response.headers.get("content-type", ""))
                )
                cache.put_page(url, page)
                return page, False
            raise PageError(f"more than {settings.max_redirects} redirects")
    except TimeoutError as exc:
        raise PageError(f"not read within {settings.timeout_s:g} s") from exc
    except httpx.HTTPError as exc:
        raise PageError(f"{type(exc).__name__}: {exc}"[:200]) from exc

"""PostgreSQL knowledge-base URLs, checked without psycopg (``KBConfig`` validates them in
any install; the driver is the ``postgres`` extra, imported only when one is opened)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from tools.errors import ConfigError, redact_credentials

SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class PgServer:
    """One server's URL, and how messages name it (never with its password)."""

    url: str
    where: str  # user@host:port/dbname
    host: str
    port: int
    password: str

    def clean(self, text: str) -> str:
        """One line of ``text`` (a driver message) without the password."""
        line = redact_credentials(" ".join(text.split()))
        return line.replace(self.password, "***") if self.password else line


def parse_database_url(url: str, what: str = "database_url") -> PgServer:
    """A ``postgresql://user[:password]@host[:port]/dbname`` URL, checked without
    connecting; a ``ConfigError`` names it (password hidden) and the problem."""
    url = url.strip()
    shown = redact_credentials(repr(url))
    try:
        parts = urlsplit(url)
        port = parts.port or 5432
    except ValueError as exc:  # a port that is no number, or out of 0..65535
        raise ConfigError(f"{what} {shown}: the port must be a number in 1..65535") from exc
    if parts.scheme.lower() not in SCHEMES:
        raise ConfigError(f"{what} must be a postgresql://user@host:port/dbname URL, got {shown}")
    host = parts.hostname or ""
    if not host or "," in parts.netloc:
        raise ConfigError(f"{what} {shown} must name one host")
    if not 1 <= port <= 65535:
        raise ConfigError(f"{what} {shown}: the port must be a number in 1..65535")
    user = unquote(parts.username or "postgres")
    where = f"{user}@{host}:{port}/{unquote(parts.path.lstrip('/'))}"
    return PgServer(url, where, host, port, unquote(parts.password or ""))


def parse_read_urls(urls: Sequence[str] | str) -> tuple[str, ...]:
    """Replica URLs from a list or a comma-separated string, each checked."""
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    found = tuple(u.strip() for u in items if u.strip())
    for i, u in enumerate(found, start=1):
        parse_database_url(u, f"read URL {i}")
    return found

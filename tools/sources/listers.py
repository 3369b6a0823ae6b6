"""What a source holds now: one ``Entry`` per document, its bytes fetched on demand.

* folder: the files under a server folder (``tools.kb.ingest.identity.find_files``: hidden files
  ignored, links followed only inside it);
* urls / sitemap: pages read through the web page reader (``tools.websearch.pages``:
  public hosts only, robots.txt, size and time limits), with a fresh page cache per sync
  so a changed page is read as it is now; a page answering 404 or 410, or one robots.txt
  now disallows, is gone;
* s3: the objects under a bucket prefix (boto3, any S3-compatible server).

Files whose type no loader reads, and a folder's links that are not followed, are left
out of the listing, each named with the reason in the sync's report. A listing that
fails as a whole raises ``SourceError``: the sync then removes nothing.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tools.access.acl import ACL, FolderRules
from tools.errors import HybridRagError, InputError
from tools.kb.documents.originals import suffix_of
from tools.kb.ingest.formats import LoadLimits
from tools.kb.ingest.identity import find_files
from tools.kb.ingest.loaders import SUPPORTED_SUFFIXES
from tools.sources.model import Source
from tools.websearch.pages import PageCache, PageError, PageSettings, fetch_page

MAX_ENTRIES = 100_000  # per source: a bound, not a target
MAX_PAGES = 5_000  # URLs of one urls/sitemap source
PAGE_CONCURRENCY = 4
_LOC = re.compile(r"<loc>\s*([^<\s]+)\s*</loc>", re.IGNORECASE)


class SourceError(HybridRagError):
    """The source cannot be listed (nothing is removed)."""


class Gone(Exception):
    """The entry is no longer in the source (404/410, disallowed): its document goes."""


class FetchError(Exception):
    """The entry could not be read this time: its document is kept as it was."""


@dataclass(frozen=True)
class Entry:
    key: str  # stable within the source: relative path, URL, object key
    name: str  # the document's path as people see it
    suffix: str  # the loader's format (".html" for a page)
    fetch: Callable[[], bytes]
    acl: ACL | None = None  # who may read it, when not the source's acl (a folder's .acl)


def list_source(source: Source, limits: LoadLimits) -> tuple[Iterable[Entry], list[str]]:
    """The entries of ``source`` (web pages fetched as they are read: iterate once) and
    the items left out, one line each with the reason (an unsupported type, a link not
    followed)."""
    if source.kind == "folder":
        return _folder(source, limits)
    if source.kind in ("urls", "sitemap"):
        return _pages(source), []
    if source.kind == "s3":
        return _s3(source, limits)
    raise SourceError(f"unknown source kind {source.kind!r}")


def _supported(name: str) -> bool:
    return suffix_of(name) in SUPPORTED_SUFFIXES


def _unsupported(name: str) -> str:
    return f"{name}: unsupported file type {suffix_of(name) or 'without a suffix'!r}"


# -- folder ------------------------------------------------------------------------------


def _folder(source: Source, limits: LoadLimits) -> tuple[list[Entry], list[str]]:
    root = Path(source.location)
    if not root.is_dir():
        raise SourceError(f"folder {root} does not exist or is not a folder")
    try:
        found, skipped = find_files([root])
    except InputError as exc:
        raise SourceError(str(exc)) from exc
    # The .acl files under it decide as they do for `hybrid-rag ingest` (the same rule);
    # a bad one stops the listing, so nothing is added with the wrong readers.
    rules = FolderRules(source.acl)
    left_out = [f"{_relative(s.source, root)}: {s.reason}" for s in skipped]
    entries = []
    for f in found[:MAX_ENTRIES]:
        if not _supported(f.name):
            left_out.append(_unsupported(f.name))
            continue
        try:
            acl = rules.acl_for(f.path)
        except InputError as exc:
            raise SourceError(str(exc)) from exc
        reader = _file_reader(f.path, limits)
        entries.append(Entry(f.name, f.name, suffix_of(f.name), reader, acl))
    return entries, left_out


def _relative(path: str, root: Path) -> str:
    for base in (root, root.resolve()):
        try:
            return Path(path).relative_to(base).as_posix()
        except ValueError:
            continue
    return path


def _file_reader(path: Path, limits: LoadLimits) -> Callable[[], bytes]:
    def read() -> bytes:
        try:
            if path.stat().st_size > limits.max_file_bytes:
                raise FetchError(f"{path.name}: over the {limits.max_file_mb:g} MB limit")
            return path.read_bytes()
        except FileNotFoundError:
            raise Gone(str(path)) from None
        except OSError as exc:
            raise FetchError(f"{path}: {exc.strerror or exc}") from None

    return read


# -- web pages ---------------------------------------------------------------------------


def _pages(source: Source) -> Iterator[Entry]:
    """The pages of a urls or sitemap source. The URLs are listed now (a sitemap that
    cannot be read is a ``SourceError``: nothing is removed); the pages are fetched
    ``PAGE_CONCURRENCY`` at a time as the sync reads them, so at most that many are held
    (all of them were: 300 pages of 1.9 MB peaked at 943 MB)."""
    settings = PageSettings.from_env()
    # This sync's own cache (a page changed since the last sync is read anew), holding
    # robots.txt rules per origin but no pages: each page is read once.
    cache = PageCache(maxsize=1, robots_maxsize=500)
    try:
        urls = asyncio.run(_page_urls(source, settings, cache))
    except PageError as exc:  # the sitemap itself
        raise SourceError(f"cannot read the sitemap {source.location}: {exc}") from exc
    return _stream_pages(urls, settings, cache)


def _stream_pages(urls: list[str], settings: PageSettings, cache: PageCache) -> Iterator[Entry]:
    for start in range(0, len(urls), PAGE_CONCURRENCY):
        window = urls[start : start + PAGE_CONCURRENCY]
        outcomes = asyncio.run(_fetch_window(window, settings, cache))
        for url, outcome in zip(window, outcomes, strict=True):
            yield Entry(url, url, ".html", _outcome_reader(url, outcome))
        del outcomes


def _outcome_reader(url: str, outcome: bytes | Exception) -> Callable[[], bytes]:
    def read() -> bytes:
        if isinstance(outcome, PageError):
            if outcome.status in (404, 410) or "robots.txt" in str(outcome):
                raise Gone(f"{url}: {outcome}")
            raise FetchError(f"{url}: {outcome}")
        if isinstance(outcome, Exception):
            raise FetchError(f"{url}: {type(outcome).__name__}: {outcome}")
        return outcome

    return read


async def _page_urls(source: Source, settings: PageSettings, cache: PageCache) -> list[str]:
    if source.kind == "sitemap":
        async with httpx.AsyncClient() as client:
            urls = await _sitemap_urls(client, source.location, settings, cache)
    else:
        urls = [u.strip() for u in re.split(r"[\s,]+", source.location) if u.strip()]
    return list(dict.fromkeys(urls))[:MAX_PAGES]


async def _fetch_window(
    urls: list[str], settings: PageSettings, cache: PageCache
) -> list[bytes | Exception]:
    async with httpx.AsyncClient() as client:

        async def one(url: str) -> bytes | Exception:
            try:
                page, _ = await fetch_page(client, url, settings, cache)
            except PageError as exc:
                return exc
            return page.html

        return list(await asyncio.gather(*(one(u) for u in urls)))


async def _sitemap_urls(
    client: httpx.AsyncClient, url: str, settings: PageSettings, cache: PageCache
) -> list[str]:
    """The page URLs of a sitemap (a sitemap index: of its sitemaps, one level)."""
    page, _ = await fetch_page(client, url, settings, cache, html=False)
    text = page.html.decode("utf-8", "replace")
    locs = [html.unescape(m) for m in _LOC.findall(text)]
    if "<sitemapindex" not in text:
        return [u for u in locs if urlsplit(u).scheme in ("http", "https")]
    pages: list[str] = []
    for nested in locs[:50]:  # bounded: an index of indexes is not followed further
        inner, _ = await fetch_page(client, nested, settings, cache, html=False)
        found = _LOC.findall(inner.html.decode("utf-8", "replace"))
        pages += [html.unescape(u) for u in found]
        if len(pages) >= MAX_PAGES:
            break
    return [u for u in pages if urlsplit(u).scheme in ("http", "https")]


# -- S3 ----------------------------------------------------------------------------------


def parse_s3(location: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` → (bucket, prefix)."""
    parts = urlsplit(location)
    if parts.scheme != "s3" or not parts.netloc:
        raise InputError(f"an S3 source is s3://BUCKET/PREFIX, got {location!r}")
    return parts.netloc, parts.path.lstrip("/")


def s3_client(source: Source) -> Any:
    """A boto3 S3 client (credentials from the environment or boto's configuration;
    ``endpoint_url`` in the source's options for an S3-compatible server)."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise SourceError("S3 sources need boto3: pip install 'hybrid-rag[s3]'") from None
    config = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 3})
    return boto3.client(
        "s3",
        endpoint_url=source.options.get("endpoint_url") or None,
        region_name=source.options.get("region") or None,
        config=config,
    )


def _s3(source: Source, limits: LoadLimits) -> tuple[list[Entry], list[str]]:
    bucket, prefix = parse_s3(source.location)
    client = s3_client(source)
    entries: list[Entry] = []
    left_out: list[str] = []
    try:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key.endswith("/"):  # a "folder" marker
                    continue
                if not _supported(key):
                    left_out.append(_unsupported(key))
                    continue
                reader = _object_reader(client, bucket, key, int(obj.get("Size", 0)), limits)
                entries.append(Entry(key, f"s3://{bucket}/{key}", suffix_of(key), reader))
                if len(entries) >= MAX_ENTRIES:
                    return entries, left_out
    except SourceError:
        raise
    except Exception as exc:  # botocore's errors: credentials, no such bucket, network
        raise SourceError(f"cannot list {source.location}: {type(exc).__name__}: {exc}") from exc
    return entries, left_out


def _object_reader(
    client: Any, bucket: str, key: str, size: int, limits: LoadLimits
) -> Callable[[], bytes]:
    def read() -> bytes:
        if size > limits.max_file_bytes:
            raise FetchError(f"s3://{bucket}/{key}: over the {limits.max_file_mb:g} MB limit")
        try:
            body = client.get_object(Bucket=bucket, Key=key)["Body"]
            return bytes(body.read(limits.max_file_bytes + 1))
        except client.exceptions.NoSuchKey:
            raise Gone(f"s3://{bucket}/{key}") from None
        except Exception as exc:
            raise FetchError(f"s3://{bucket}/{key}: {type(exc).__name__}: {exc}") from None

    return read

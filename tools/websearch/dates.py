"""Publication-date parsing across providers.

Every date becomes an aware ISO-8601 string in UTC (``2024-05-02T17:40:05+00:00``)
or ``None`` when it cannot be parsed. Naive inputs (``2024-05-02T17:40:05``,
``Jan 29, 2023``) are taken as UTC: providers rarely say which zone they mean and
UTC keeps results from different providers comparable. Relative dates
("3 hours ago", "3天前", "昨天") are resolved against the fetch time; months and
years count as 30 and 365 days.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

_ABSOLUTE_FORMATS = (
    "%b %d, %Y",  # Jan 29, 2023
    "%B %d, %Y",  # September 9, 2023
    "%d %b %Y",  # 29 Jan 2023
    "%d %B %Y",
    "%b %d %Y",
    "%B %d %Y",
    "%Y/%m/%d",
    "%Y.%m.%d",
    "%Y-%m-%d %H:%M:%S UTC",  # SerpApi metadata style
    "%b %Y",
    "%B %Y",
)
_FRACTION = re.compile(r"(\.\d{6})\d+")
_CJK_DATE = re.compile(
    r"^(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*日"
    r"(?:\s*(\d{1,2})[:：](\d{2}))?"
)
_EN_RELATIVE = re.compile(
    r"^(\d+|an?|one)\s*(second|sec|minute|min|hour|hr|h|day|d|week|wk|w|month|mo|year|yr|y)s?"
    r"\s+ago$"
)
_ZH_RELATIVE = re.compile(r"^(\d+)\s*(秒|秒钟|分钟|分|小时|个小时|天|日|周|星期|个月|月|年)\s*前$")

_EN_UNITS = {
    "second": 1,
    "sec": 1,
    "minute": 60,
    "min": 60,
    "hour": 3600,
    "hr": 3600,
    "h": 3600,
    "day": 86400,
    "d": 86400,
    "week": 7 * 86400,
    "wk": 7 * 86400,
    "w": 7 * 86400,
    "month": 30 * 86400,
    "mo": 30 * 86400,
    "year": 365 * 86400,
    "yr": 365 * 86400,
    "y": 365 * 86400,
}
_ZH_UNITS = {
    "秒": 1,
    "秒钟": 1,
    "分": 60,
    "分钟": 60,
    "小时": 3600,
    "个小时": 3600,
    "天": 86400,
    "日": 86400,
    "周": 7 * 86400,
    "星期": 7 * 86400,
    "个月": 30 * 86400,
    "月": 30 * 86400,
    "年": 365 * 86400,
}
_DAY_WORDS = {
    "today": 0,
    "just now": 0,
    "今天": 0,
    "刚刚": 0,
    "yesterday": 1,
    "昨天": 1,
    "前天": 2,
}


def _aware(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _iso(dt: datetime) -> str:
    return _aware(dt).replace(microsecond=0).isoformat()


def parse_datetime(value: str | None, now: datetime | None = None) -> datetime | None:
    """Parse ``value`` into an aware UTC datetime, or ``None`` if unparseable."""
    if not value or not isinstance(value, str):
        return None
    text = " ".join(value.split())
    if not text:
        return None
    now = _aware(now or datetime.now(UTC))
    lower = text.lower()

    if lower in _DAY_WORDS:
        return now - timedelta(days=_DAY_WORDS[lower])
    m = _EN_RELATIVE.match(lower)
    if m:
        count = 1 if m.group(1) in ("a", "an", "one") else int(m.group(1))
        return now - timedelta(seconds=count * _EN_UNITS[m.group(2)])
    m = _ZH_RELATIVE.match(text)
    if m:
        return now - timedelta(seconds=int(m.group(1)) * _ZH_UNITS[m.group(2)])
    m = _CJK_DATE.match(text)
    if m:
        try:
            year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
            hour, minute = int(m.group(4) or 0), int(m.group(5) or 0)
            return datetime(year, month, day, hour, minute, tzinfo=UTC)
        except ValueError:
            return None

    # ISO 8601; Bing-style 7-digit fractions are trimmed to microseconds first.
    try:
        return _aware(datetime.fromisoformat(_FRACTION.sub(r"\1", text)))
    except ValueError:
        pass
    # RFC 1123 / RFC 2822 ("Thu, 20 Nov 2025 14:30:00 GMT").
    if "," in text[:5] or text[:3].isalpha():
        try:
            return _aware(parsedate_to_datetime(text))
        except (TypeError, ValueError, IndexError):
            pass
    for fmt in _ABSOLUTE_FORMATS:
        try:
            return _aware(datetime.strptime(text, fmt))
        except ValueError:
            continue
    return None


def parse_date(value: str | None, now: datetime | None = None) -> str | None:
    """Like :func:`parse_datetime` but returns an ISO-8601 string (seconds precision)."""
    dt = parse_datetime(value, now)
    return None if dt is None else _iso(dt)


def iso_now(now: datetime | None = None) -> str:
    """Aware ISO-8601 timestamp of ``now`` (default: the current UTC time)."""
    return _iso(now or datetime.now(UTC))

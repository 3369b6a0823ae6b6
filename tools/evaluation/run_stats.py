"""Per-run statistics: one JSON line per answered question, and a report over them."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tools.errors import ConfigError

_lock = threading.Lock()
# Advice appears when more than this share of knowledge-routed runs fell back to the web.
HIGH_FALLBACK_RATE = 0.3


def record_run(path: Path, run: dict[str, Any]) -> None:
    """Append one run as one JSON line, written by a single ``write`` in append mode so
    concurrent writers never interleave; a torn last line (a killed writer) is closed
    first, so it cannot swallow this record. Into an existing folder only: a question
    asked of a data home that does not exist leaves nothing behind."""
    line = json.dumps(
        {"at": datetime.now(UTC).isoformat(timespec="seconds"), **run}, ensure_ascii=False
    )
    data = (line + "\n").encode("utf-8")
    with _lock:
        if not path.parent.is_dir():  # a run never creates a data home (nothing ingested)
            return
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)  # read: last byte
        try:
            if not _ends_with_newline(fd):
                data = b"\n" + data
            os.write(fd, data)
        finally:
            os.close(fd)


def _ends_with_newline(fd: int) -> bool:
    """Whether the file is empty or its last byte is a newline (a torn line is not)."""
    size = os.fstat(fd).st_size
    return size == 0 or os.pread(fd, 1, size - 1) == b"\n"


def load_runs(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The recorded runs, and how many lines could not be read (torn, not JSON, not a
    run record: :func:`is_run`): those are skipped, never fatal."""
    if not path.exists():
        return [], 0
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:  # a directory in its place, no permission
        raise ConfigError(
            f"run log {path} cannot be read: {exc.strerror or type(exc).__name__}"
        ) from exc
    runs: list[dict[str, Any]] = []
    unreadable = 0
    for line in text.split("\n"):  # only "\n" ends a record (JSON may hold U+2028)
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: "[[[[..." nesting
            value = None
        if is_run(value):
            runs.append(value)
        else:
            unreadable += 1
    return runs, unreadable


def is_run(value: Any) -> bool:
    """Whether a line's value is a run record: an object with a ``route`` (text, or null
    before routing) and, when given, a numeric ``search_cost``. Another program's JSON
    lines in the file are not runs."""
    if not isinstance(value, dict) or "route" not in value:
        return False
    cost = value.get("search_cost")
    route_ok = value["route"] is None or isinstance(value["route"], str)
    return route_ok and (cost is None or (isinstance(cost, int | float) and cost >= 0))


def report(runs: list[dict[str, Any]], unreadable: int = 0) -> dict[str, Any]:
    by_strategy: dict[str, int] = {}
    by_route: dict[str, int] = {}
    for r in runs:
        by_strategy[str(r.get("strategy"))] = by_strategy.get(str(r.get("strategy")), 0) + 1
        by_route[str(r.get("route"))] = by_route.get(str(r.get("route")), 0) + 1
    kb_routed = [r for r in runs if r.get("route") == "knowledge"]
    # The decision recorded; records written before it existed carry only the label.
    fallbacks = sum(
        1
        for r in kb_routed
        if r.get("web_fallback", r.get("strategy") == "search_fallback") is True
    )
    rate = fallbacks / len(kb_routed) if kb_routed else 0.0
    cost = sum(float(r.get("search_cost") or 0) for r in runs)
    out: dict[str, Any] = {
        "runs": len(runs),
        "by_strategy": by_strategy,
        "by_route": by_route,
        "fallback_rate": round(rate, 4),
        "search_cost_total": round(cost, 6),
        "search_cost_avg": round(cost / len(runs), 6) if runs else 0.0,
        "unreadable_lines": unreadable,
        "advice": None,
    }
    if kb_routed and rate > HIGH_FALLBACK_RATE:
        out["advice"] = (
            f"{rate:.0%} of knowledge-base questions fell back to web search: "
            "the knowledge base lacks these topics; add documents with 'hybrid-rag ingest'."
        )
    return out

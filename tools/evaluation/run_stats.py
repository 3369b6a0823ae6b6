"""Per-run statistics: one JSON line per answered question, and a report over them."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_lock = threading.Lock()
# Advice appears when more than this share of knowledge-routed runs fell back to the web.
HIGH_FALLBACK_RATE = 0.3


def record_run(path: Path, run: dict[str, Any]) -> None:
    line = json.dumps(
        {"at": datetime.now(UTC).isoformat(timespec="seconds"), **run}, ensure_ascii=False
    )
    with _lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def load_runs(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    runs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            runs.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line from a killed process
    return runs


def report(runs: list[dict[str, Any]]) -> dict[str, Any]:
    by_strategy: dict[str, int] = {}
    by_route: dict[str, int] = {}
    for r in runs:
        by_strategy[str(r.get("strategy"))] = by_strategy.get(str(r.get("strategy")), 0) + 1
        by_route[str(r.get("route"))] = by_route.get(str(r.get("route")), 0) + 1
    kb_routed = [r for r in runs if r.get("route") == "knowledge"]
    fallbacks = sum(1 for r in kb_routed if r.get("strategy") == "search_fallback")
    rate = fallbacks / len(kb_routed) if kb_routed else 0.0
    cost = sum(float(r.get("search_cost") or 0) for r in runs)
    out: dict[str, Any] = {
        "runs": len(runs),
        "by_strategy": by_strategy,
        "by_route": by_route,
        "fallback_rate": round(rate, 4),
        "search_cost_total": round(cost, 6),
        "search_cost_avg": round(cost / len(runs), 6) if runs else 0.0,
        "advice": None,
    }
    if kb_routed and rate > HIGH_FALLBACK_RATE:
        out["advice"] = (
            f"{rate:.0%} of knowledge-base questions fell back to web search: "
            "the knowledge base lacks these topics; add documents with 'hybrid-rag ingest'."
        )
    return out

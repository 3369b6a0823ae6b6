"""``aegra.json`` from ``langgraph.json``: one source of truth for both servers.

Aegra reads a config of the same shape with two differences: a graph is a plain
``"file.py:export"`` string, called with no argument when callable (langgraph-api's
factories take a runtime), and the custom app must be FastAPI. So each graph of
``langgraph.json`` (a factory in ``server/graphs.py``) maps to the factory of the same
name in ``server/aegra_app.py``, and ``http.app`` to that module's app; the auth handler is
the same. ``python -m server.aegra_config`` rewrites ``aegra.json``; tests/test_production
fails when the committed file differs from what this makes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tools.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SERVER_MODULE = "./server/graphs.py"
AEGRA_MODULE = "./server/aegra_app.py"


def _path(spec: Any) -> str:
    return str(spec["path"] if isinstance(spec, Mapping) else spec)


def aegra_config(langgraph: Mapping[str, Any]) -> dict[str, Any]:
    """The Aegra config serving what ``langgraph`` (a parsed langgraph.json) serves."""
    graphs: dict[str, str] = {}
    for name, spec in langgraph["graphs"].items():
        module, _, export = _path(spec).partition(":")
        if module != SERVER_MODULE:
            raise ConfigError(f"langgraph.json graph {name!r}: expected {SERVER_MODULE}:NAME")
        graphs[name] = f"{AEGRA_MODULE}:{export}"
    config: dict[str, Any] = {
        "dependencies": list(langgraph.get("dependencies", ["."])),
        "graphs": graphs,
    }
    if "auth" in langgraph:
        config["auth"] = {"path": _path(langgraph["auth"])}
    if "app" in langgraph.get("http", {}):
        config["http"] = {"app": f"{AEGRA_MODULE}:app"}
    return config


def render(root: Path = ROOT) -> str:
    langgraph = json.loads((root / "langgraph.json").read_text(encoding="utf-8"))
    return json.dumps(aegra_config(langgraph), indent=2) + "\n"


def main() -> int:
    (ROOT / "aegra.json").write_text(render(), encoding="utf-8")
    print(f"wrote {ROOT / 'aegra.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

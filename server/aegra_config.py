"""``server/aegra.json`` from ``langgraph.json``: one source of truth for both servers.

Aegra reads a config of the same shape with two differences: a graph is a plain
``"file.py:export"`` string, called with no argument when callable (langgraph-api's
factories take a runtime), and the custom app must be FastAPI. So each graph of
``langgraph.json`` (a factory in ``server/graphs.py``) maps to the factory of the same
name in ``server/aegra_app.py``, and ``http.app`` to that module's app; the auth handler is
the same.

The config lives inside the ``server`` package and ships in the wheel (package data):
Aegra resolves a config's file paths against the config's own folder, so the same file
serves a checkout (``AEGRA_CONFIG=server/aegra.json``) and an installed copy with no
source tree (the image; ``python -m server.aegra_config --path`` prints its path). The graphs'
descriptions ride along (``descriptions``, a key Aegra does not read) for ``/mcp``.
``python -m server.aegra_config`` rewrites it; tests/test_production fails when the
committed file differs from what this makes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tools.errors import ConfigError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CONFIG = HERE / "aegra.json"
SERVER_MODULE = "./server/graphs.py"
AUTH_MODULE = "./server/auth.py"
AEGRA_MODULE = "./aegra_app.py"  # relative to the config's folder, server/


def _path(spec: Any) -> str:
    return str(spec["path"] if isinstance(spec, Mapping) else spec)


def aegra_config(langgraph: Mapping[str, Any]) -> dict[str, Any]:
    """The Aegra config serving what ``langgraph`` (a parsed langgraph.json) serves."""
    graphs: dict[str, str] = {}
    descriptions: dict[str, str] = {}
    for name, spec in langgraph["graphs"].items():
        module, _, export = _path(spec).partition(":")
        if module != SERVER_MODULE:
            raise ConfigError(f"langgraph.json graph {name!r}: expected {SERVER_MODULE}:NAME")
        graphs[name] = f"{AEGRA_MODULE}:{export}"
        if isinstance(spec, Mapping) and spec.get("description"):
            descriptions[name] = str(spec["description"])
    # No "dependencies": an installed copy imports its packages from site-packages, and a
    # checkout's server runs with the checkout installed (editable) or as its cwd.
    config: dict[str, Any] = {"graphs": graphs}
    if "auth" in langgraph:
        module, _, export = _path(langgraph["auth"]).partition(":")
        if module != AUTH_MODULE:
            raise ConfigError(f"langgraph.json auth: expected {AUTH_MODULE}:NAME")
        config["auth"] = {"path": f"./auth.py:{export}"}
    if "app" in langgraph.get("http", {}):
        config["http"] = {"app": f"{AEGRA_MODULE}:app"}
    if descriptions:
        config["descriptions"] = descriptions
    return config


def render(root: Path = ROOT) -> str:
    langgraph = json.loads((root / "langgraph.json").read_text(encoding="utf-8"))
    return json.dumps(aegra_config(langgraph), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``--path``: print this installation's config (for AEGRA_CONFIG); else rewrite it."""
    if (sys.argv[1:] if argv is None else argv) == ["--path"]:
        if not CONFIG.is_file():
            print(f"hybrid-rag: error: {CONFIG} is missing from this installation",
                  file=sys.stderr)  # fmt: skip
            return 1
        print(CONFIG)
        return 0
    CONFIG.write_text(render(), encoding="utf-8")
    print(f"wrote {CONFIG}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What an API caller may set in a server run's context: every ``Context`` field but the
deployment's (server paths, hosts, credentials), and no misspelt field. The CLI and the
Python API build ``Context`` directly (their caller owns the process); the server's
routes check here (``server.graphs``, ``server.request_guard``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from run.context import Context
from tools.errors import ConfigError

# The fields an API caller may not set (server paths, hosts, credentials): the deployment
# sets them (environment, ``langgraph.json``'s env); everything else is per run.
DEPLOYMENT_FIELDS = frozenset(f.name for f in fields(Context) if f.metadata.get("deployment"))
PER_RUN_FIELDS = frozenset(f.name for f in fields(Context)) - DEPLOYMENT_FIELDS


def api_context(values: Mapping[str, Any]) -> Context:
    """A server run's context, checked for what an API caller may send.

    * Deployment fields (:data:`DEPLOYMENT_FIELDS`) other than their default are refused:
      a caller must not choose the server's directories or the hosts it connects to.
    * A key that is not a field passes (the server mirrors ``configurable`` into the
      context, and platforms put ``user_id`` or thread metadata there), unless it looks
      like a misspelt field (``confidnce_threshold``), which would silently run on the
      default.
    """
    known = {k: v for k, v in values.items() if k in PER_RUN_FIELDS or k in DEPLOYMENT_FIELDS}
    defaults = {f.name: f.default for f in fields(Context)}
    refused = sorted(k for k in known if k in DEPLOYMENT_FIELDS and known[k] != defaults[k])
    if refused:
        raise ConfigError(
            f"context field(s) {', '.join(refused)} are set per deployment (the server's "
            "environment), not per run: remove them from the run or assistant"
        )
    misspelt = {
        k: close[0]
        for k in sorted(set(values) - set(known))
        if (close := difflib.get_close_matches(k, defaults, n=1, cutoff=0.85))
    }
    if misspelt:
        raise ConfigError(
            f"unknown context field(s): {', '.join(misspelt)} (did you mean "
            f"{', '.join(misspelt.values())}?)"
        )
    return Context(**known)

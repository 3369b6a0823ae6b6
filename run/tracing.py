"""LangSmith tracing helpers: useful metadata on each node's run, and secret redaction.

Tracing is LangChain's own: with ``LANGSMITH_TRACING=true`` (plus ``LANGSMITH_API_KEY``
and optionally ``LANGSMITH_ENDPOINT`` / ``LANGSMITH_PROJECT``) every graph node becomes a
named run (``prepare``, ``route``, ``rewrite``, …). This module only *adds* to those
runs; it never starts tracing and never sends anything itself:

* :func:`annotate_run` puts metadata on the current node's run (``route``, ``strategy``,
  ``confidence``, ``mode``, ``web_provider``, ``cache_hits``…). With tracing off there is
  no current run and it does nothing.
* :func:`run_summary` picks those fields from a node's partial update (called for every
  node by ``run.deadline.with_default_context``).
* :func:`redact_secrets` / :func:`redacting_client` are a second line of defence: no key
  ever enters the graph state (keys are read from the environment inside the web-search
  client and the model factory), and a ``langsmith.Client`` built here also scrubs the
  value of every secret environment variable from traced inputs and outputs.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from tools.websearch.web_settings import key_variables, url_credentials

log = logging.getLogger("hybrid_rag.tracing")
_URL_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/\s@:]+:[^/\s@]+@", re.I)

# Environment variables whose *values* must never leave the process in a trace, besides
# the web-search providers' keys, which come from the provider table (secret_env_vars).
OTHER_SECRET_ENV_VARS = (
    "OPENAI_API_KEY",
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "CHROMA_API_KEY",
)


def secret_env_vars() -> tuple[str, ...]:
    """Every secret variable: the ones above and every registered provider's key."""
    return (*OTHER_SECRET_ENV_VARS, *key_variables())


REDACTED = "[redacted]"
# Secrets shorter than this are not scrubbed (they would match ordinary text).
_MIN_SECRET_LEN = 8

# Scalar state fields worth seeing on a node's run without opening its outputs.
_SCALARS = (
    "route",
    "strategy",
    "confidence",
    "mode",
    "language",
    "iteration",
    "next_source",
    "citation_validity",
    "search_calls",
    "search_cost",
    "model_calls",
)
_COUNTS = {
    "internal_docs": "internal_results",
    "web_docs": "web_results",
    "citations": "citations",
    "warnings": "warnings",
    "kb_queries": "kb_queries",
    "web_queries": "web_queries",
    "sources": "sources",
}


def run_summary(update: Mapping[str, Any] | None, node: str = "") -> dict[str, Any]:
    """Small, secret-free metadata describing a node's partial state update.

    ``prepare`` nodes reset the per-turn fields to defaults; only their ``mode`` and
    ``language`` are meaningful, so only those are reported for them.
    """
    if not update:
        return {}
    if node.endswith("prepare"):
        return {k: update[k] for k in ("mode", "language") if update.get(k)}
    meta: dict[str, Any] = {}
    for key in _SCALARS:
        value = update.get(key)
        if isinstance(value, (str, int, float, bool)) and value != "":
            meta[key] = value
    for key, name in _COUNTS.items():
        value = update.get(key)
        if isinstance(value, list):
            meta[name] = len(value)
    if update.get("web_error"):
        meta["web_error"] = True
    providers = sorted(
        {str(d.get("provider")) for d in update.get("web_docs") or [] if d.get("provider")}
    )
    if providers:
        meta["web_provider"] = ",".join(providers)
    return meta


def current_run() -> Any | None:
    """The LangSmith run of the node being executed, or None when tracing is off."""
    try:
        from langsmith.run_helpers import get_current_run_tree

        return get_current_run_tree()
    except Exception:  # tracing must never break a run
        return None


def annotate_run(**metadata: Any) -> None:
    """Add metadata to the current run (a node's run while the node executes)."""
    if not metadata:
        return
    trace = current_run()  # LangSmith's run tree (not a node's ``run``, run.run_view)
    if trace is None:
        return
    try:
        trace.metadata.update({f"hybrid_rag.{k}": v for k, v in metadata.items()})
    except Exception as exc:  # never fail the node for a trace annotation
        log.debug("could not annotate the run: %s", type(exc).__name__)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the secret environment variables that are set (long enough to match),
    and the passwords of URLs set in ``*_URL`` variables (``SEARXNG_BASE_URL``, the
    checkpoint database…) in every form, Basic-auth base64 included."""
    env = os.environ if environ is None else environ
    names = [*secret_env_vars(), *(k for k in env if k.startswith("WEBSEARCH_") and "KEY" in k)]
    candidates = [env.get(n) or "" for n in names]
    for name, value in env.items():
        if name.endswith("_URL") and "@" in value:
            candidates += url_credentials(value)
    values = {v for v in candidates if len(v) >= _MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact_secrets(data: Any, secrets: list[str] | None = None) -> Any:
    """A copy of ``data`` with every secret value, and the ``user:password@`` of every
    URL, replaced by ``[redacted]``."""
    values = secret_values() if secrets is None else secrets
    return _redact(data, values)


def _redact(data: Any, secrets: list[str]) -> Any:
    if isinstance(data, str):
        for secret in secrets:
            if secret in data:
                data = data.replace(secret, REDACTED)
        # user:password@ of any URL, whether or not its password was configured here
        return _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", data)
    if isinstance(data, Mapping):
        return {k: _redact(v, secrets) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_redact(v, secrets) for v in data]
    return data


def _hide(data: dict[str, Any]) -> dict[str, Any]:
    out = redact_secrets(data)
    return out if isinstance(out, dict) else data


def redacting_client(**kwargs: Any) -> Any:
    """A ``langsmith.Client`` that scrubs secret values from traced inputs and outputs.

    Use it with ``langchain_core.tracers.context.tracing_v2_enabled(client=...)`` or
    ``LangChainTracer(client=...)``; other keyword arguments go to ``Client``.
    """
    from langsmith import Client

    return Client(hide_inputs=_hide, hide_outputs=_hide, **kwargs)

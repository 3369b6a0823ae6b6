"""The run's settings from the environment, read once per run.

``prepare`` calls :func:`resolve_run_settings` at the start of every run; the nodes
below it (retrieval, the agent's tools, approval) read :func:`run_settings`, so a run
sees one consistent environment and no search re-reads it. The result is kept on the
run's ``Context`` object (an attribute, not a field: it is not configuration, is never
published, and holds keys that must stay out of the state and its checkpoints). A run
resumed after a pause, or a node called on its own, resolves it on first use.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tools.errors import HybridRagError
from tools.settings import chroma_server_env, model_timeout
from tools.websearch import WebSearchSettings

if TYPE_CHECKING:  # types only: at run time nodes never import graph/
    from graph.context import Context

# id(context) -> its settings; an entry leaves with its Context (weakref.finalize), so an
# id reused by a later object never finds the old entry.
_by_context: dict[int, RunSettings] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class ModelEnv:
    """What the environment says about chat models: an OpenAI-compatible base URL, the key
    (kept out of reprs, the state and traces), the request time limit."""

    base_url: str = ""
    api_key: str = field(default="", repr=False)
    timeout: float = 60.0
    problem: HybridRagError | None = None  # a malformed $HYBRID_RAG_MODEL_TIMEOUT

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> ModelEnv:
        """Read it now (``prepare`` does, once per run; callers outside a run too)."""
        env = os.environ if env is None else env
        base_url, key = env.get("OPENAI_BASE_URL", ""), env.get("OPENAI_API_KEY", "")
        try:
            return cls(base_url, key, model_timeout())
        except HybridRagError as exc:  # met when a model is built, as a model failure
            return cls(base_url, key, problem=exc)


@dataclass(frozen=True)
class RunSettings:
    """What the environment adds to the ``Context`` for one run."""

    web: WebSearchSettings | None  # None: web search disabled (search_provider=none)
    web_problem: HybridRagError | None  # a web-search configuration error, met per search
    chroma_host: str | None  # $CHROMA_HOST / $CHROMA_PORT, for a context without chroma_host
    chroma_port: int | None
    chroma_problem: HybridRagError | None  # a malformed $CHROMA_PORT, met when the KB opens
    model: ModelEnv = ModelEnv()  # chat models' base URL, key and time limit


def resolve_run_settings(ctx: Context, environ: Mapping[str, str] | None = None) -> RunSettings:
    """Read the environment now and keep the result for the rest of the run."""
    env = os.environ if environ is None else environ
    web: WebSearchSettings | None = None
    problem: HybridRagError | None = None
    if ctx.search_provider.strip().lower() != "none":
        try:
            web = WebSearchSettings.from_env(
                env,
                provider=ctx.search_provider,
                snippet_chars=ctx.snippet_chars,
                timeout=ctx.search_timeout,
                max_attempts=ctx.search_max_attempts,
                time_budget=ctx.search_time_budget,
            )
        except HybridRagError as exc:  # reported by each search, as a failed search
            problem = exc
    host: str | None = None
    port: int | None = None
    chroma_problem: HybridRagError | None = None
    try:
        host, port = chroma_server_env(env)
    except HybridRagError as exc:
        chroma_problem = exc
    settings = RunSettings(web, problem, host, port, chroma_problem, ModelEnv.read(env))
    key = id(ctx)
    with _lock:
        if key not in _by_context:
            weakref.finalize(ctx, _forget, key)
        _by_context[key] = settings
    return settings


def _forget(key: int) -> None:
    with _lock:
        _by_context.pop(key, None)


def run_settings(ctx: Context) -> RunSettings:
    """The settings ``prepare`` resolved for this run (resolved now if it did not)."""
    with _lock:
        settings = _by_context.get(id(ctx))
    return settings if settings is not None else resolve_run_settings(ctx)

"""The run's settings from the environment, read once per run, and the run's deadline.

``prepare`` calls :func:`resolve_run_settings` at the start of every run and puts the
result in the state's ``run_settings`` channel, which LangGraph never checkpoints and no
output, stream or schema shows (``run.state``). The nodes below it take it from there
through their run's view (``run.run_view.run_of``) and pass it on as values: to the
search service (web-search settings, page settings, the search cache, the knowledge
base's data home and Chroma server) and to the models (:class:`ModelEnv`). So a run sees
one consistent environment, and nothing below ``prepare`` reads it. A run resumed after
a pause (a new run, maybe hours later) starts with the channel empty: the graph's node
wrapper resolves its settings, and so its deadline, once at its start
(``run.deadline.with_default_context``). A node called on its own gets them in its state
or fails naming the problem (``run.run_view.RunSettingsMissingError``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.errors import HybridRagError
from tools.settings import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    chroma_server_env,
    home_path,
    kb_database_env,
    model_timeout,
)
from tools.websearch import SearchCache, WebSearchSettings, default_cache
from tools.websearch.pages import PageSettings

if TYPE_CHECKING:
    from run.context import Context


@dataclass(frozen=True)
class ModelEnv:
    """What the environment says about chat models: an OpenAI-compatible base URL, the key
    (kept out of reprs, the state and traces), the request time limit; and the run's
    ``Context.max_output_tokens`` (every call's ``max_tokens``)."""

    base_url: str = ""
    api_key: str = field(default="", repr=False)
    timeout: float = 60.0
    problem: HybridRagError | None = None  # a malformed $HYBRID_RAG_MODEL_TIMEOUT
    max_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> ModelEnv:
        """Read it from ``env`` (default ``os.environ``; callers outside a run)."""
        env = os.environ if env is None else env
        base_url, key = env.get("OPENAI_BASE_URL", ""), env.get("OPENAI_API_KEY", "")
        try:
            return cls(base_url, key, model_timeout(env))
        except HybridRagError as exc:  # met when a model is built, as a model failure
            return cls(base_url, key, problem=exc)


def _released() -> None:
    return None


class RunSettings:
    """What the environment adds to the ``Context`` for one run.

    Opaque on purpose (not a dataclass, no ``dict``/``model_dump``, a repr without values):
    it holds keys, and whatever serialises a node's input (a trace, a debug stream) sees
    only ``RunSettings(...)``.
    """

    __slots__ = (
        "cache", "chroma", "deadline", "home", "kb_database", "model", "pages", "web", "web_problem"
    )  # fmt: skip

    def __init__(
        self,
        *,
        web: WebSearchSettings | None,
        web_problem: HybridRagError | None,
        chroma: tuple[str | None, int | None] | HybridRagError,
        model: ModelEnv,
        home: Path,
        pages: PageSettings,
        cache: SearchCache,
        deadline: float,
        kb_database: tuple[str, tuple[str, ...]] = ("", ()),
    ) -> None:
        self.web = web  # None: web search disabled (search_provider=none)
        self.web_problem = web_problem  # a web-search configuration error, met per search
        # ($CHROMA_HOST, $CHROMA_PORT) for a context without chroma_host, or why they are bad
        self.chroma = chroma
        # ($HYBRID_RAG_KB_DATABASE_URL, $HYBRID_RAG_KB_READ_URLS) for a context without them
        self.kb_database = kb_database
        self.model = model  # chat models' base URL, key and time limit
        self.home = home  # the data home (the context's, else $HYBRID_RAG_HOME, else XDG)
        self.pages = pages  # reading the pages behind web results (host allowance)
        self.cache = cache  # the process's web-search cache
        # The run's end (epoch seconds, Context.run_timeout_s from the run's start): one
        # per run, so a run resumed after a pause, which resolves its own, gets its own.
        self.deadline = deadline

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        # A run's settings (an untracked state channel: they hold keys) outlive the run in
        # langgraph dev's in-memory thread record, which deep-copies them on a rename
        # (PATCH /threads/{id}) and pickles them to its .langgraph_api folder; both failed
        # on the cache's lock. Copied or pickled they become None: nothing needs them after
        # the run, and no key reaches a disk.
        return _released, ()

    def __repr__(self) -> str:
        return "RunSettings(...)"


def resolve_run_settings(ctx: Context, environ: Mapping[str, str] | None = None) -> RunSettings:
    """Read the environment now, for one run starting now (``prepare``, or the node
    wrapper of a resumed run): the settings and the run's deadline."""
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
    chroma: tuple[str | None, int | None] | HybridRagError
    try:
        chroma = chroma_server_env(env)
    except HybridRagError as exc:  # met when the KB opens
        chroma = exc
    return RunSettings(
        web=web,
        web_problem=problem,
        chroma=chroma,
        kb_database=kb_database_env(env),
        model=dataclasses.replace(ModelEnv.read(env), max_tokens=ctx.max_output_tokens),
        home=home_path(ctx.data_home or None, env),
        pages=PageSettings.from_env(env),
        cache=default_cache(),
        deadline=time.time() + ctx.run_timeout_s,
    )


def settings_in(state: Mapping[str, Any]) -> RunSettings | None:
    """The run's settings held in ``state`` (None: none, e.g. the first task of a paused
    run resumed later, whose untracked settings channel starts empty)."""
    settings = state.get("run_settings")
    return settings if isinstance(settings, RunSettings) else None

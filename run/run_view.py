"""One way for a node to reach its run: ``run_of(state, runtime)``.

As langchain-ai/react-agent's nodes read their run through ``get_runtime(Context)``, every
node and tool of both graphs reads its run through one :class:`RunView`, made once per
call from the node's ``(state, runtime)`` (a tool's ``ToolRuntime`` carries both): the
``Context`` (:attr:`RunView.ctx`), the settings ``prepare`` resolved from the environment
(:attr:`RunView.settings`), the models (:attr:`RunView.fast_model`,
:attr:`RunView.model_env`), the search service (:meth:`RunView.search`,
:meth:`RunView.kb_probe`), the caller's reader and role (:attr:`RunView.reader`,
:attr:`RunView.operator`), the deadline (:attr:`RunView.past_deadline`) and the trace
metadata (:meth:`RunView.annotate`). No helper takes a context and a state in some order:
it takes the view (``tests/test_run_view.py`` keeps it so).

Nothing here reads the environment. A run's settings are resolved once at its start
(``prepare``; a paused run resumed later is a new run, whose start is the graph's node
wrapper, ``run.deadline.with_default_context``); a node that needs them and finds none
in its state fails with :class:`RunSettingsMissingError`, naming the problem.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from run.models import resolve_model_spec
from run.reader import run_operator, run_reader
from run.run_settings import ModelEnv, RunSettings, settings_in
from run.search_setup import kb_probe, search_service
from run.tracing import annotate_run
from tools.access.acl import Reader
from tools.answer.search_service import SearchService

if TYPE_CHECKING:
    from run.context import Context


class RunSettingsMissingError(RuntimeError):
    """A node asked for its run's settings and its state holds none.

    Not a ``HybridRagError`` on purpose: no node may turn it into a warning and go on
    with settings read from somewhere else."""


class RunLike(Protocol):
    """What a view needs of LangGraph's ``Runtime`` (nodes) or ``ToolRuntime`` (tools)."""

    @property
    def context(self) -> Any: ...

    @property
    def stream_writer(self) -> Any: ...


MISSING_SETTINGS = (
    "the run's settings are missing from the state: prepare resolves them at the start "
    "of a run (and the graph's node wrapper when a paused run resumes); a node called on "
    "its own needs state['run_settings'] = run.run_settings.resolve_run_settings(context)"
)


@dataclass(frozen=True)
class RunView:
    """A node's run, read-only: see the module doc. Cheap to make; make one per call."""

    state: Mapping[str, Any]
    runtime: RunLike

    @property
    def ctx(self) -> Context:
        context: Context = self.runtime.context
        return context

    @property
    def settings(self) -> RunSettings:
        """The settings resolved at the run's start (:class:`RunSettingsMissingError`
        when the state holds none: never read again from the environment)."""
        settings = settings_in(self.state)
        if settings is None:
            raise RunSettingsMissingError(MISSING_SETTINGS)
        return settings

    @property
    def model_env(self) -> ModelEnv:
        """The chat-model environment of the run (base URL, key, limits)."""
        return self.settings.model

    @property
    def fast_model(self) -> str:
        """The fast model's spec as ``prepare`` resolved it (for a node called on its own
        without one: resolved from the context by the run's model environment)."""
        spec = self.state.get("fast_mode")
        if spec:
            return str(spec)
        return resolve_model_spec(self.ctx.fast_model, fallback=self.ctx.model, env=self.model_env)

    @property
    def past_deadline(self) -> bool:
        """Whether the run's deadline has passed (``run.deadline``: a node then runs late,
        and the answer's deadline sentence says why it is extractive); never for a node
        called on its own, without settings."""
        settings = settings_in(self.state)
        return settings is not None and time.time() >= settings.deadline

    @property
    def reader(self) -> Reader:
        """Whom the run searches for: the caller's reader, within the context's scope."""
        return run_reader(self.ctx.scope, self.settings.home)

    @property
    def operator(self) -> bool:
        """Whether the caller runs the server (reads how it is configured)."""
        return run_operator()

    def search(self) -> SearchService:
        """The run's search service (knowledge base, web, approval: ``run.search_setup``)."""
        return search_service(
            self.ctx, self.settings, self.reader, web_skipped=bool(self.state.get("web_skipped"))
        )

    async def kb_probe(self, question: str) -> tuple[float, list[str]]:
        """The router's "does the KB answer this?" over what the caller may read."""
        return await kb_probe(self.ctx, self.settings, self.reader, question)

    def annotate(self, **metadata: Any) -> None:
        """Metadata on the node's trace run (nothing when tracing is off)."""
        annotate_run(**metadata)


def run_of(state: Mapping[str, Any], runtime: RunLike) -> RunView:
    """The one accessor: a node's (or a tool's) run from its ``(state, runtime)``."""
    return RunView(state, runtime)

"""One handle per node: :class:`RunView`, the node's ``run``.

As langchain-ai/react-agent's nodes read their run through ``get_runtime(Context)``, every
node and tool of both graphs reads its run through one :class:`RunView`, made once per
call: a node's body is ``async def node(state, run)``, and :func:`node` (the decorator
on every node) makes the view from LangGraph's ``(state, runtime)`` and merges what the
body reported through it into the update (a tool's ``ToolRuntime`` carries both, so a tool
calls :func:`run_of`). The view holds the ``Context`` (:attr:`RunView.context`), the
settings ``prepare`` resolved from the environment (:attr:`RunView.settings`), the
models (:attr:`RunView.fast_model`, :attr:`RunView.model_env`), the knowledge base
(:meth:`RunView.kb`), the caller's reader and role (:attr:`RunView.reader`,
:attr:`RunView.operator`), the deadline (:attr:`RunView.past_deadline`), the trace
metadata (:meth:`RunView.annotate`) and the node's reports: progress events
(:meth:`RunView.emit`), timings (:meth:`RunView.timed`) and warnings (:meth:`RunView.warn`).
No helper takes a context and a state in some order: it takes the view
(``tests/test_run_view.py`` keeps it so; the search service is
``run.search_setup.search_service(run)``).

Nothing here reads the environment. A run's settings are resolved once at its start
(``prepare``; a paused run resumed later is a new run, whose start is the graph's node
wrapper, ``run.deadline.with_default_context``); a node that needs them and finds none
in its state fails with :class:`RunSettingsMissingError`, naming the problem.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from run.models import resolve_model_spec
from run.reader import run_operator, run_reader
from run.resources import get_kb
from run.run_settings import ModelEnv, RunSettings, settings_in
from run.tracing import annotate_run
from tools.access.acl import Reader

if TYPE_CHECKING:
    from langgraph.runtime import ExecutionInfo

    from run.context import Context
    from tools.kb.knowledge_base import KnowledgeBase


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
    """A node's run: see the module doc. Cheap to make; make one per call. Read-only but
    for what the node reports (:attr:`timings`, :attr:`warnings`, :attr:`timed_itself`),
    which :func:`node` merges into its update."""

    state: Mapping[str, Any]
    runtime: RunLike
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Whether the node timed itself: its update then names its timings and warnings,
    # empty or not (as every timed node's did before the view reported them).
    timed_itself: list[bool] = field(default_factory=list)

    @property
    def context(self) -> Context:
        context: Context = self.runtime.context
        return context

    @property
    def execution_info(self) -> ExecutionInfo | None:
        """LangGraph's public ``Runtime.execution_info`` (None for a tool's runtime)."""
        info: ExecutionInfo | None = getattr(self.runtime, "execution_info", None)
        return info

    @property
    def settings(self) -> RunSettings:
        """The settings resolved at the run's start (:class:`RunSettingsMissingError`
        when the state holds none: never read again from the environment)."""
        settings = settings_in(self.state)
        if settings is None:
            raise RunSettingsMissingError(MISSING_SETTINGS)
        return settings

    def starting(self, settings: RunSettings) -> RunView:
        """This view with the settings ``prepare`` just resolved for the run (its reports
        go on in the same lists)."""
        return dataclasses.replace(self, state={**self.state, "run_settings": settings})

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
        return resolve_model_spec(
            self.context.fast_model, fallback=self.context.model, env=self.model_env
        )

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
        return run_reader(self.context.scope, self.settings.home)

    @property
    def operator(self) -> bool:
        """Whether the caller runs the server (reads how it is configured)."""
        return run_operator()

    def kb(self) -> KnowledgeBase:
        """The run's knowledge base (``run.resources``: one open per configuration)."""
        return get_kb(self.context, self.settings)

    def annotate(self, **metadata: Any) -> None:
        """Metadata on the node's trace run (nothing when tracing is off)."""
        annotate_run(**metadata)

    def emit(self, step: str, **data: Any) -> None:
        """A progress event on LangGraph's custom stream ("routing…", "searching…")."""
        self.runtime.stream_writer({"step": step, **data})

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Time the block as the node's ``name`` (milliseconds, in the update's timings)."""
        self.timed_itself.append(True)
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round((time.perf_counter() - started) * 1000, 2)

    def warn(self, warning: str) -> None:
        """A warning for the answer (before those the node's update names itself)."""
        self.warnings.append(warning)


def run_of(state: Mapping[str, Any], runtime: RunLike) -> RunView:
    """A tool's run from its ``ToolRuntime`` (a node's comes from :func:`node`)."""
    return RunView(state, runtime)


S = TypeVar("S", bound=Mapping[str, Any])
S_contra = TypeVar("S_contra", bound=Mapping[str, Any], contravariant=True)
Body = Callable[[S, RunView], Awaitable[dict[str, Any]]]


class Step(Protocol[S_contra]):
    """A node as LangGraph calls it, ``(state, runtime)``, or as another node's body calls
    it, with that body's ``run``."""

    def __call__(
        self, state: S_contra, runtime: RunLike | RunView
    ) -> Awaitable[dict[str, Any]]: ...


def reported(run: RunView, update: dict[str, Any]) -> dict[str, Any]:
    """``update`` with the timings and warnings the node reported through ``run``: its
    warnings first, then those the update names; its timings under the update's. (A
    reset the update makes, ``Overwrite``, is left alone.)"""
    merged = dict(update)
    own = update.get("warnings")
    if isinstance(own, list | None) and (run.warnings or run.timed_itself or own is not None):
        merged["warnings"] = [*run.warnings, *(own or [])]
    times = update.get("timings")
    if isinstance(times, dict | None) and (run.timings or run.timed_itself):
        merged["timings"] = {**run.timings, **(times or {})}
    return merged


def node(body: Body[S]) -> Step[S]:
    """A node from its body ``(state, run)``: LangGraph calls it with ``(state, runtime)``
    and the view is made once here; a node called from another node's body with that
    body's ``run`` shares its view (its reports join the caller's)."""

    @functools.wraps(body)
    async def call(state: S, runtime: RunLike | RunView) -> dict[str, Any]:
        if isinstance(runtime, RunView):
            return await body(state, runtime)
        run = RunView(state, runtime)
        return reported(run, await body(state, run))

    # LangGraph reads a node's signature to pass it ``runtime``: the node's, not its body's.
    del call.__wrapped__
    return call

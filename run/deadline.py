"""The run deadline (``Context.run_timeout_s``): one bound on a whole run.

``prepare`` starts it (``RunSettings.deadline``, resolved with the run's settings at its
start; a paused run resumed later is a new run and gets its own, see
:func:`resumed_run`); every node then runs within what is left of it
(:func:`within_deadline`, applied by both graph builders). A node still busy at the
deadline is cancelled and, like every later node, runs again "late": with the offline
rules instead of the models (``mode``/``fast_mode`` offline), and with a late variant where
the offline rule would still wait on the network (web search, the agent's tools: each
beside its node, ``nodes.retrieve.late_search_web``, ``graph.agent.model_loop.late_*``). The run so
ends with an answer from what it gathered, saying why, and never hangs on a model that
accepts a request and never answers. :func:`with_default_context` is how both graph
builders add every node.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from prompts.notices import (
    DEADLINE_EN,
    DEADLINE_SENTENCE_EN,
    DEADLINE_SENTENCE_ZH,
)
from run.context import Context
from run.models import OFFLINE
from run.run_settings import resolve_run_settings, settings_in
from run.tracing import annotate_run, run_summary
from tools.kb.store.store_deadline import store_deadline

if TYPE_CHECKING:
    from run.state import State

# Seconds a late node (offline rules, no network) may take before it is skipped.
LATE_BUDGET_S = 10.0
# The key a late node's state carries when the deadline cut the node off mid-way.
CUT_OFF = "cut_off"

NodeFn = Callable[[Any, Runtime[Any]], Awaitable[dict[str, Any]]]


def deadline_reason(ctx: Context) -> str:
    return DEADLINE_EN.format(seconds=ctx.run_timeout_s)


def deadline_sentence(ctx: Context, language: str) -> str:
    template = DEADLINE_SENTENCE_ZH if language == "zh" else DEADLINE_SENTENCE_EN
    return template.format(seconds=ctx.run_timeout_s)


def resumed_run(state: Mapping[str, Any], runtime: Runtime[Context]) -> dict[str, Any]:
    """The start of a run resumed after a pause, or ``{}`` for a task of a running run.

    A person may answer an approval question hours later; LangGraph then re-runs the
    paused task alone, in a new run that never passes ``prepare``. The run's settings
    live in an untracked channel (``run.state``: never checkpointed), so that task finds
    none: this is how it knows, through LangGraph's public state alone, that its run
    starts here (so does a run continued after a failure, ``invoke(None)``: a new run
    too). The environment is read once for the resumed run, and its deadline starts now;
    the update puts them in the state for the run's later nodes."""
    if settings_in(state) is not None:
        return {}
    return {"run_settings": resolve_run_settings(runtime.context)}


async def within_deadline(
    node: NodeFn, state: Mapping[str, Any], runtime: Runtime[Context], late: NodeFn | None = None
) -> dict[str, Any]:
    """Run ``node`` within the run's deadline; past it, its late form (see module doc)."""
    settings = settings_in(state)
    if settings is None:  # a node called on its own, outside a graph's run
        return await node(state, runtime)
    deadline = settings.deadline
    # Cancelling the node cannot stop a knowledge-base call in its worker thread (and
    # the process waits for that thread at exit): the Chroma requests end by it too.
    with store_deadline(float(deadline)):
        left = float(deadline) - time.time()
        if left > 0:
            budget = asyncio.timeout(left)
            try:
                async with budget:
                    return await node(state, runtime)
            except TimeoutError:
                if not budget.expired():
                    raise  # the node's own timeout, not the deadline
                # Cut off in the middle: its late form knows (the agent counts the model
                # call the deadline cut off, ``model_calls``).
                state = {**state, CUT_OFF: True}
        return await run_late(node, state, runtime, late)


async def run_late(
    node: NodeFn, state: Mapping[str, Any], runtime: Runtime[Context], late: NodeFn | None
) -> dict[str, Any]:
    """The node's late form. The deadline is stated once: the answer carries the sentence
    and :func:`stated_once` drops the warning then (``finalize``)."""
    ctx = runtime.context
    offline = {**state, "mode": OFFLINE, "fast_mode": OFFLINE}
    warning = deadline_reason(ctx)
    try:
        async with asyncio.timeout(LATE_BUDGET_S):
            update = dict(await (late or node)(offline, runtime))
    except TimeoutError:
        update = {}
    if not isinstance(update.get("warnings"), Overwrite):  # finalize's own final list stays
        update["warnings"] = [*(update.get("warnings") or []), warning]
    sentence = deadline_sentence(ctx, str(state.get("language") or "en"))
    if update.get("answer") and sentence not in update["answer"]:  # cite keeps the draft's
        update["answer"] = f"{update['answer']}\n\n{sentence}"
    return update


def stated_once(warnings: list[str], answer: str, ctx: Context, language: str) -> list[str]:
    """``warnings`` without the deadline's when the answer already states it (the
    deadline is said once: in the answer, else in the warnings)."""
    if deadline_sentence(ctx, language) not in answer:
        return warnings
    return [w for w in warnings if w != deadline_reason(ctx)]


S = TypeVar("S", bound="State")  # State, or the agent graph's AgentState
S_contra = TypeVar("S_contra", bound="State", contravariant=True)


class Node(Protocol[S_contra]):
    """A node: (its graph's state, the run's Context) -> a partial update."""

    def __call__(self, state: S_contra, runtime: Runtime[Context]) -> Awaitable[dict[str, Any]]: ...


def with_default_context(
    node: Node[S], late: Node[S] | None = None, *, starts_run: bool = False
) -> Node[S]:
    """Give the node a default ``Context`` when the caller passed none, and run it within
    the run's deadline (``run_timeout_s``; past it, ``late`` or the node's offline form:
    see above). The node that ``starts_run`` (``prepare``) resolves a new turn's settings
    and deadline; any other node that finds none starts a resumed run (:func:`resumed_run`).

    When LangSmith tracing is on, the node's run also gets a summary of its update
    (route, strategy, confidence, counts…) as metadata; see ``run.tracing``.
    """

    name = getattr(node, "__name__", type(node).__name__)

    @functools.wraps(node)
    async def wrapped(state: S, runtime: Runtime[Context]) -> dict[str, Any]:
        if runtime.context is None:
            runtime = dataclasses.replace(runtime, context=Context())
        if starts_run:
            update = await node(state, runtime)
        else:
            resumed = resumed_run(state, runtime)
            state = {**state, **resumed} if resumed else state  # type: ignore[assignment]
            update = {**await within_deadline(node, state, runtime, late), **resumed}
        annotate_run(**run_summary(update, name))
        return update

    return wrapped

"""The graph state: what flows between the nodes (both graphs' ``State``; a leaf: it
imports nothing of ``nodes`` or of the graph builders, so nodes import it freely).

Rules the nodes follow: ``question`` is the user's question exactly as asked and
is written once per turn (by ``prepare``); every loop counter is a plain integer
that a node overwrites with ``old + 1`` (no additive reducer, so no 1, 3, 7
growth); per-turn lists are reset by ``prepare`` (see ``run.reducers``).
Sources are plain dicts (typed as ``tools.answer.sources.Source``) so checkpoints and the
server can serialise them.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.channels import UntrackedValue
from langgraph.graph.message import add_messages
from pydantic import Field

# typing_extensions' TypedDict, not typing's: on Python 3.11 pydantic cannot build a JSON
# schema from typing.TypedDict, and the LangGraph server then reports input_schema and
# output_schema as null (Studio's form and chat view need them).
from typing_extensions import TypedDict

from run.reducers import add_warnings, merge_or_reset
from tools.answer.sources import Source
from tools.policy.decisions import Decision, EvidenceRecord, Route


class InputState(TypedDict, total=False):
    """What a caller sends: a question, or chat messages (the last human one is asked)."""

    # The description reaches the input schema the server publishes (Studio's form, and the
    # tool an MCP client sees at /mcp), so a calling model knows what to send.
    question: Annotated[
        str,
        Field(
            description="The question to answer, in English or Chinese, from the knowledge "
            "base and the live web; the answer cites its sources ([internal-n], [web-n])."
        ),
    ]
    messages: Annotated[list[AnyMessage], add_messages]


class OutputState(TypedDict, total=False):
    """What a caller gets back."""

    messages: Annotated[list[AnyMessage], add_messages]
    question: str
    answer: str
    citations: list[dict[str, Any]]
    citation_validity: float
    crosslingual: dict[str, Any]
    route: Route
    route_reason: str
    strategy: str  # a reporting label derived from ``decision`` (tools.policy.strategy_label)
    confidence: float
    evidence: EvidenceRecord  # what the turn's last decision was taken on
    decision: Decision  # the last tools.policy.decide() of the turn (fallback, refusal)
    iteration: int
    reasoning: list[dict[str, Any]]
    search_cost: float
    search_calls: int
    pages_read: int  # web pages read for their passages (Context.read_pages)
    pages_failed: int  # web pages that could not be read (reasons in warnings)
    warnings: Annotated[list[str], add_warnings]
    timings: Annotated[dict[str, Any], merge_or_reset]
    mode: str
    language: str
    tool_calls: list[dict[str, Any]]


class State(InputState, OutputState, total=False):
    """Full working state of the state graph."""

    history: list[dict[str, str]]
    kb_queries: list[str]
    web_queries: list[str]
    internal_docs: list[Source]
    web_docs: list[Source]
    web_searched: bool  # a web search ran this turn (or failed)
    web_skipped: bool  # the person approving web searches skipped one this turn
    web_error: str  # why the last web search found nothing ('' after a success)
    web_fetched_at: str
    next_query: str
    next_source: str
    sources: list[Source]
    answer_message_id: str | None
    answer_draft: str  # the model's reply as streamed (cite compares the checked text)
    asked_id: str  # the human message the last prepare took as its question
    fast_mode: str  # the fast model's spec, resolved once per run by prepare (see mode)
    planned: dict[
        str, list[str]
    ]  # the router's queries ({'kb': [...], 'web': [...]}), with a model
    # The run's settings from the environment and its deadline (run.run_settings.RunSettings,
    # set by prepare): an untracked channel, so never checkpointed, and in no output (it
    # holds keys); a paused run resumed later finds it empty and resolves its own
    # (run.deadline.resumed_run). guard=False: tasks of one step resumed together (a run
    # continued after a crash) each resolve them, and any one of those values will do.
    run_settings: Annotated[Any, UntrackedValue(object, guard=False)]


class AgentOutputState(OutputState, total=False):
    """The state graph's output plus the agent's model-call count."""

    model_calls: int


class AgentState(State, AgentOutputState, total=False):
    """The state graph's working state plus ``model_calls`` and ``degraded`` (reset by
    ``agent_prepare``)."""

    degraded: str  # why the offline rules took over from the model ('' while it drives)

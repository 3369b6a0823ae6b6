"""Both graphs as a backend of langchain-ai's agent-chat-ui (issue 35, item 6).

Through a real ``langgraph dev`` on 127.0.0.1, this sends exactly what agent-chat-ui
sends (its repository as of late 2025: ``src/components/thread/index.tsx``,
``src/providers/Stream.tsx``, ``agent-inbox/hooks/use-interrupted-actions.tsx``): the key
as ``x-api-key``, a new thread, then ``runs/stream`` with ``{"messages": [{"type":
"human", "content": [{"type": "text", "text": ...}]}]}``, and approval answers as
``command.resume = {"decisions": [...]}``. It then checks what the client would render:
the last AI message's text (``getContentString``: text blocks joined) with a source for
every label it shows, and an interrupt its inbox recognises
(``isAgentInboxInterruptSchema``, transcribed below).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage
from pydantic import ValidationError

from graph import Context, build_graph
from nodes.prepare import current_question
from tests.team_server import WEB_QUESTION, TeamServer
from tools.answer.citations import LABEL_RE
from tools.answer.sources_block import with_sources, without_sources
from tools.errors import InputError
from tools.text import content_text
from tools.websearch import WebSearchDecision

GRAPHS = ("hybrid_rag", "tool_agent")
KB_QUESTION = "How many days of annual leave after 6 years of service?"
ZH_QUESTION = "工作满6年有多少天年假？"
# useStream's stream modes for a submit from agent-chat-ui.
STREAM_MODE = ["values", "messages-tuple", "custom"]
RUN_GUARD_S = 120.0


# --- in-process: the pieces -------------------------------------------------------------


def test_content_blocks_are_text_and_other_blocks_are_named() -> None:
    blocks = [{"type": "text", "text": "annual leave"}, {"type": "text", "text": "6 years"}]
    assert content_text(blocks) == "annual leave\n6 years"
    image = [{"type": "text", "text": "what is this"}, {"type": "image", "url": "x"}]
    with pytest.raises(InputError, match="'image' block"):
        content_text(image)
    assert content_text(image, strict=False) == "what is this"


def test_hitl_decisions_become_web_search_decisions() -> None:
    def decide(value: object) -> tuple[str, list[str] | None]:
        d = WebSearchDecision.model_validate(value)
        return d.action, d.queries

    assert decide({"decisions": [{"type": "approve"}]}) == ("approve", None)
    assert decide({"decisions": [{"type": "reject", "message": "no"}]}) == ("skip", None)
    edit = {"type": "edit", "edited_action": {"name": "web_search", "args": {"queries": ""}}}
    for given, queries in (("a b\nc", ["a b", "c"]), ('["x", "y"]', ["x", "y"]), (["z"], ["z"])):
        edit["edited_action"]["args"]["queries"] = given  # type: ignore[index]
        assert decide({"decisions": [edit]}) == ("edit", queries)
    assert decide({"action": "skip"}) == ("skip", None)  # the existing form
    with pytest.raises(ValidationError, match="exactly one decision"):
        decide({"decisions": []})
    with pytest.raises(ValidationError, match="approve, edit or reject"):
        decide({"decisions": [{"type": "respond"}]})


def test_the_sources_block_lists_each_label_and_comes_off_for_history() -> None:
    cited = [
        {"label": "[internal-1]", "type": "internal", "title": "Annual leave",
         "path": "policies/annual-leave.md", "location": "p. 3"},
        {"label": "[web-1]", "type": "web", "title": "Python 3.14.2 released",
         "url": "https://www.python.org/x", "published_at": "2025-12-01T00:00:00"},
    ]  # fmt: skip
    text = with_sources("18 days [internal-1], Python [web-1].", cited, "en")
    assert text.endswith(
        "**Sources**\n- [internal-1] Annual leave — policies/annual-leave.md, p. 3\n"
        "- [web-1] Python 3.14.2 released — <https://www.python.org/x> (2025-12-01)"
    )
    assert without_sources(text) == "18 days [internal-1], Python [web-1]."
    assert "**来源**" in with_sources("x", cited, "zh")
    assert with_sources("nothing found", [], "en") == "nothing found"


def test_a_question_field_wins_over_a_chat_message_no_turn_took() -> None:
    # The thread's first run (chat input) was cancelled before prepare: no asked_id.
    left = HumanMessage([{"type": "text", "text": "old"}], id="m1")
    state: dict[str, Any] = {"messages": [left], "question": "new question"}
    assert current_question(state) == ("new question", True)
    # Sent both ways at once: one question, the message's.
    assert current_question({"messages": [left], "question": "old"}) == ("old", False)
    assert current_question({"messages": [left]}) == ("old", False)


async def test_after_a_chat_run_cancelled_before_prepare_the_new_question_is_answered(
    sample_home: Path,
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_graph(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    ctx = Context(data_home=str(sample_home), search_provider="none")
    left = {"type": "human", "content": [{"type": "text", "text": "What is the VPN policy?"}]}
    await graph.ainvoke({"messages": [left]}, config, context=ctx, interrupt_before=["prepare"])
    out = await graph.ainvoke({"question": KB_QUESTION}, config, context=ctx)
    assert out["question"] == KB_QUESTION
    assert "18" in out["answer"], out["answer"]


# --- through langgraph dev, as agent-chat-ui -------------------------------------------


class ChatUi:
    """The requests agent-chat-ui makes, with its API key header."""

    def __init__(self, team: TeamServer, user: str = "alice") -> None:
        self.http = httpx.Client(
            base_url=team.url,
            headers={"X-Api-Key": team.tokens[user]},
            timeout=RUN_GUARD_S,
        )

    def new_thread(self) -> str:
        response = self.http.post("/threads", json={"metadata": {}})
        response.raise_for_status()
        return str(response.json()["thread_id"])

    def stream(self, thread: str, assistant: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
        payload = {
            "assistant_id": assistant,
            "stream_mode": STREAM_MODE,
            "stream_subgraphs": True,
            "stream_resumable": True,
            **body,
        }
        events: list[tuple[str, Any]] = []
        with self.http.stream("POST", f"/threads/{thread}/runs/stream", json=payload) as r:
            r.raise_for_status()
            event = ""
            for line in r.iter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    events.append((event, json.loads(line[5:])))
        return events

    def send(self, thread: str, assistant: str, text: str) -> list[tuple[str, Any]]:
        message = {"id": str(uuid.uuid4()), "type": "human",
                   "content": [{"type": "text", "text": text}]}  # fmt: skip
        return self.stream(thread, assistant, {"input": {"messages": [message]}})

    def resume(
        self, thread: str, assistant: str, decision: dict[str, Any]
    ) -> list[tuple[str, Any]]:
        return self.stream(thread, assistant, {"input": {}, "command": {"resume": {"decisions": [decision]}}})  # fmt: skip

    def state(self, thread: str) -> dict[str, Any]:
        response = self.http.get(f"/threads/{thread}/state")
        response.raise_for_status()
        return dict(response.json())


def content_string(content: Any) -> str:
    """agent-chat-ui's ``getContentString``: a string, or the text blocks joined."""
    if isinstance(content, str):
        return content
    return " ".join(c["text"] for c in content if c.get("type") == "text")


def is_inbox_interrupt(value: Any) -> bool:
    """agent-chat-ui's ``isAgentInboxInterruptSchema`` (src/lib/agent-inbox-interrupt.ts)."""
    first = value[0] if isinstance(value, list) else value
    hitl = first.get("value") if isinstance(first, dict) else None
    if not isinstance(hitl, dict):
        return False
    requests, configs = hitl.get("action_requests"), hitl.get("review_configs")
    if not isinstance(requests, list) or not requests:
        return False
    if not isinstance(configs, list) or not configs:
        return False
    return all(
        isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("args"), dict)
        for r in requests
    ) and all(
        isinstance(c, dict)
        and isinstance(c.get("action_name"), str)
        and isinstance(c.get("allowed_decisions"), list)
        for c in configs
    )


def last_values(events: list[tuple[str, Any]]) -> dict[str, Any]:
    values = [data for event, data in events if event == "values"]
    assert values, events[-3:]
    return dict(values[-1])


def rendered_answer(values: dict[str, Any]) -> str:
    """What the client shows last: the last AI message's text."""
    ai = [m for m in values["messages"] if m["type"] == "ai" and content_string(m["content"])]
    assert ai, values["messages"]
    return content_string(ai[-1]["content"])


def assert_sources_resolve(text: str) -> None:
    """Every label in the answer names a line of the sources block after it."""
    answer, _, block = text.rpartition("\n---\n")
    labels = {m.group(0) for m in LABEL_RE.finditer(answer)}
    assert labels, text
    listed = {m.group(1) for m in re.finditer(r"^- (\[[^\]]+\]) \S", block, re.M)}
    assert labels <= listed, (labels, block)


def assistant_with(team: TeamServer, graph: str, context: dict[str, Any]) -> str:
    """An assistant the user configures once and names in agent-chat-ui's settings."""
    http = ChatUi(team).http
    response = http.post("/assistants", json={"graph_id": graph, "context": context})
    response.raise_for_status()
    return str(response.json()["assistant_id"])


@pytest.mark.parametrize("graph", GRAPHS)
def test_content_block_messages_are_answered_with_their_sources(
    team: TeamServer, graph: str
) -> None:
    ui = ChatUi(team)
    thread = ui.new_thread()
    values = last_values(ui.send(thread, graph, KB_QUESTION))
    assert values["question"] == KB_QUESTION
    text = rendered_answer(values)
    assert "18" in text and "**Sources**" in text, text
    assert_sources_resolve(text)
    assert "annual-leave.md" in text.rpartition("**Sources**")[2]
    assert values["citations"], "citations stay in the state"
    # A follow-up on the same thread, in Chinese: answered in Chinese, sources in Chinese.
    values = last_values(ui.send(thread, graph, ZH_QUESTION))
    text = rendered_answer(values)
    assert "**来源**" in text and "[内部-1]" in text, text
    human = [m for m in values["messages"] if m["type"] == "human"]
    assert len(human) == 2  # no unanswered or duplicated message left on the thread


def test_the_api_key_header_is_the_token_and_a_wrong_one_is_refused(team: TeamServer) -> None:
    ok = httpx.post(f"{team.url}/threads", json={}, headers={"x-api-key": team.tokens["bob"]})
    assert ok.status_code == 200, ok.text
    for headers in ({"x-api-key": "not-a-token"}, {}):
        refused = httpx.post(f"{team.url}/threads", json={}, headers=headers)
        assert refused.status_code == 401, refused.text


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize(
    ("decision", "searched", "says"),
    [
        ({"type": "approve"}, None, "[web-1]"),  # None: (at least) the queries asked about
        (
            {
                "type": "edit",
                "edited_action": {
                    "name": "web_search",
                    "args": {"queries": "python 3.14 release notes GRAPH"},
                },
            },
            ["python 3.14 release notes GRAPH"],  # GRAPH: the graph's name (no cache hit)
            "[web-1]",
        ),
        ({"type": "reject", "message": "no paid search"}, [], "skipped by the user"),
    ],
    ids=["approve", "edit", "reject"],
)
def test_the_approval_is_an_inbox_request_resumed_with_decisions(
    team: TeamServer, graph: str, decision: dict[str, Any], searched: list[str] | None, says: str
) -> None:
    assistant = assistant_with(
        team, graph, {"approve_web_search": True, "search_provider": "serper", "model": "offline"}
    )
    decision = json.loads(json.dumps(decision).replace("GRAPH", graph))
    searched = [q.replace("GRAPH", graph) for q in searched] if searched is not None else None
    ui = ChatUi(team)
    thread = ui.new_thread()
    before = len(team.searched())
    # A search already in the cache costs nothing and asks no approval: each case asks its
    # own question (a number is no key term, so the offline answer still quotes the web).
    case = 10 * ["approve", "edit", "reject"].index(decision["type"]) + GRAPHS.index(graph)
    ui.send(thread, assistant, f"{WEB_QUESTION} {case}")
    interrupts = ui.state(thread)["interrupts"]
    assert is_inbox_interrupt(interrupts), interrupts
    request = interrupts[0]["value"]["action_requests"][0]
    assert request["name"] == "web_search" and request["args"]["queries"]
    assert "USD" in request["description"]  # the estimated cost, readable in the inbox
    assert team.searched()[before:] == []  # nothing searched before the decision
    values = last_values(ui.resume(thread, assistant, decision))
    for _ in range(3):  # a reflection may plan one more search: asked again, same answer
        if not ui.state(thread)["interrupts"]:
            break
        values = last_values(ui.resume(thread, assistant, decision))
    assert not ui.state(thread)["interrupts"]
    done = set(team.searched()[before:])
    if searched is None:  # the queries asked about (those not cached by an earlier test)
        cached = interrupts[0]["value"]["cached_queries"]
        assert set(request["args"]["queries"]) - set(cached) <= done
    else:
        assert done == set(searched)
    text = rendered_answer(values)
    assert says in text, text
    if decision["type"] != "approve":
        return
    # The existing resume form still works on the same thread.
    ui.send(thread, assistant, f"{WEB_QUESTION} {case + 100}")
    values = last_values(
        ui.stream(thread, assistant, {"input": {}, "command": {"resume": {"action": "skip"}}})
    )
    assert "skipped by the user" in rendered_answer(values)

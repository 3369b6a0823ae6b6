"""Issue 27: a server to put in front of users.

In-process checks first (question of the turn, run deadline, notices in the answer's
language, context rules, build context), then the same through ``langgraph dev`` and
langgraph-sdk on 127.0.0.1 where the point is about the server.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from graph import Context, build_graph
from graph.agent.agent_graph import build_agent_graph
from nodes.prepare import current_question
from run.api_context import DEPLOYMENT_FIELDS, PER_RUN_FIELDS, api_context
from run.localize import localize
from tests.agent_fakes import LocalLLMServer
from tests.langgraph_server import (
    REPO,
    SAMPLE_KB,
    LocalServer,
    ingest_sample_kb,
    sdk,
    start_server,
    stop_server,
    wait_until_ready,
)
from tests.local_provider import BlackHole
from tools.answer.sources_block import without_sources
from tools.errors import ConfigError

KB_QUESTION = "How many days of annual leave after 6 years of service?"
NEW_QUESTION = "Who approves a purchase of CNY 80,000?"
HANG_GUARD_S = 120.0  # only so a regression fails instead of hanging the suite


# --- 1. the question of the turn -------------------------------------------------------


def test_a_new_question_wins_over_an_unanswered_message_of_a_cancelled_turn() -> None:
    # The cancelled turn's prepare took "old" (asked_id) and added its message; the run
    # never answered. The next input is a plain question.
    old = HumanMessage("old question", id="m1")
    state: dict[str, Any] = {"messages": [old], "asked_id": "m1", "question": NEW_QUESTION}
    assert current_question(state) == (NEW_QUESTION, True)


def test_a_new_chat_message_wins_over_the_previous_turns_question_field() -> None:
    state: dict[str, Any] = {
        "messages": [HumanMessage(KB_QUESTION, id="m1"), AIMessage("18 days", id="a1"),
                     HumanMessage("And carry-over?", id="m2")],
        "asked_id": "m1",
        "question": KB_QUESTION,  # left over from the previous turn
    }  # fmt: skip
    assert current_question(state) == ("And carry-over?", False)


def test_a_new_question_wins_over_a_chat_message_no_prepare_took() -> None:
    # Cancelled before prepare ended: the chat message m2 was never taken.
    state: dict[str, Any] = {
        "messages": [HumanMessage("q0", id="m1"), AIMessage("a0", id="a1"),
                     HumanMessage("never answered", id="m2")],
        "asked_id": "m1",
        "question": NEW_QUESTION,
    }  # fmt: skip
    assert current_question(state) == (NEW_QUESTION, True)


async def test_after_a_cancelled_run_the_thread_answers_the_new_question(
    sample_home: Path, tmp_path: Path
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_graph(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    ctx = Context(data_home=str(sample_home), search_provider="none")
    # A run cancelled after prepare (interrupt_before stands for the cancel).
    await graph.ainvoke({"question": KB_QUESTION}, config, context=ctx, interrupt_before=["route"])
    out = await graph.ainvoke({"question": NEW_QUESTION}, config, context=ctx)
    assert out["question"] == NEW_QUESTION
    assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)][-1] == NEW_QUESTION


# --- 2, 3. what an API caller may set --------------------------------------------------


def test_deployment_fields_are_refused_from_api_callers() -> None:
    assert {"data_home", "chroma_host", "chroma_port"} <= DEPLOYMENT_FIELDS
    assert not DEPLOYMENT_FIELDS & PER_RUN_FIELDS
    for values in ({"data_home": "/tmp/x"}, {"chroma_host": "10.0.0.1"}, {"chroma_port": 1}):
        with pytest.raises(ConfigError, match="set per deployment"):
            api_context(values)
    assert api_context({"data_home": ""}).data_home == ""  # the default is harmless


def test_other_configurable_keys_pass_and_misspelt_fields_fail() -> None:
    ctx = api_context({"user_id": "u1", "thread_ts": "x", "top_k_web": 3})
    assert ctx.top_k_web == 3
    with pytest.raises(ConfigError, match=r"confidnce_threshold \(did you mean"):
        api_context({"confidnce_threshold": 0.5})


async def test_citations_show_paths_relative_to_the_kb_not_the_servers(
    sample_home: Path,
) -> None:
    ctx = Context(data_home=str(sample_home), search_provider="none")
    out = await build_graph().ainvoke({"question": KB_QUESTION}, context=ctx)
    paths = [c["path"] for c in out["citations"]]
    assert paths and all(not p.startswith("/") for p in paths), paths
    assert any(p.endswith("annual-leave.md") for p in paths), paths
    assert str(sample_home.parent) not in repr(out)


# --- 4. one run deadline ---------------------------------------------------------------


@pytest.mark.parametrize("builder", [build_graph, build_agent_graph])
async def test_a_hung_model_ends_at_the_run_deadline_with_an_answer(
    sample_home: Path, monkeypatch: pytest.MonkeyPatch, builder: Any
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("HYBRID_RAG_MODEL_TIMEOUT", raising=False)  # 60 s per call, retried
    with BlackHole() as hole:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{hole.url}/v1")
        ctx = Context(
            data_home=str(sample_home), model="openai:hung", search_provider="none",
            crosslingual=False, run_timeout_s=2,
        )  # fmt: skip
        out = await asyncio.wait_for(
            builder().ainvoke({"question": KB_QUESTION}, context=ctx), HANG_GUARD_S
        )
    if builder is build_graph:  # it retrieved before the deadline; the agent's model hung first
        assert "18 days" in out["answer"], out["answer"]
    assert out["answer"].count("The run deadline (2 s) was reached") == 1, out["answer"]
    # Stated once (issue 46): the answer says it, so the warnings do not repeat it.
    assert not any("run deadline" in w for w in out["warnings"]), out["warnings"]


@pytest.mark.parametrize("builder", [build_graph, build_agent_graph])
async def test_a_later_turn_is_not_bound_by_the_previous_turns_deadline(
    sample_home: Path, builder: Any
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = builder(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t-deadline"}}
    ctx = Context(data_home=str(sample_home), search_provider="none")
    await graph.ainvoke({"question": KB_QUESTION}, config, context=ctx)
    # The deadline is the run's (with its settings, never checkpointed): none is left in
    # the thread for the next turn to inherit.
    assert "deadline" not in (await graph.aget_state(config)).values
    out = await graph.ainvoke({"question": NEW_QUESTION}, config, context=ctx)
    assert not any("deadline" in w for w in out["warnings"]), out["warnings"]
    assert "deadline" not in out["answer"]


# --- 10. notices in the answer's language ----------------------------------------------


def test_notices_are_localized() -> None:
    text = "web search not configured: set one of SERPER_API_KEY, X (or use provider 'ddgs' after pip install ddgs)"
    zh = localize(text, "zh")
    assert zh.startswith("未配置网络搜索：请设置 SERPER_API_KEY, X 之一"), zh
    assert localize(text, "en") == text
    assert localize("web search failed: web search is disabled (search_provider=none)", "zh") == (
        "网络搜索失败：网络搜索已关闭（search_provider=none）"
    )


async def test_a_chinese_answer_carries_chinese_reasons(sample_home: Path) -> None:
    ctx = Context(data_home=str(sample_home))
    out = await build_graph().ainvoke({"question": "今天上海的天气怎么样？"}, context=ctx)
    assert out["language"] == "zh"
    # Plainly, without the seven *_API_KEY names it listed (issue 56): those are doctor's.
    assert out["answer"].rstrip().endswith("网络搜索尚未设置——请联系管理员。"), out["answer"]
    assert "_API_KEY" not in out["answer"] and "pip install" not in out["answer"]
    assert "web search" not in out["answer"]
    # Said once, in the answer's note: not repeated (in either language) under its notes.
    assert not any("web search" in w or "网络搜索" in w for w in out["warnings"]), out["warnings"]


# --- through langgraph dev + langgraph-sdk ---------------------------------------------

DRAFT = "After 6 years of service: 18 days [internal-1] [internal-9]."
WEB_QUESTION = "What is the latest stable Python release today?"
OFFLINE_KB = {"model": "offline", "search_provider": "none"}


class ChatServer(LocalLLMServer):
    """OpenAI-compatible: model ``hung`` accepts the request and never answers (until the
    test ends); any other model answers ``DRAFT`` (whose ``[internal-9]`` the citation
    check drops). ``/search`` answers like Serper, with no results."""

    def __init__(self) -> None:
        super().__init__([{"content": DRAFT}])
        self.release = threading.Event()
        self.hung = 0

    def _chat(self, h: Any, body: dict[str, Any]) -> None:
        if body.get("model") == "hung":
            with self._lock:
                self.hung += 1
            self.release.wait(HANG_GUARD_S)
            return
        super()._chat(h, body)

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        super().__exit__(*exc)


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    with server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Iterator[LocalServer]:
    base = tmp_path_factory.mktemp("hardening-server")
    home = base / "home"
    home.mkdir()
    env = {
        "OPENAI_BASE_URL": f"{chat.base_url}/v1",
        "SERPER_API_KEY": "test-key",
        "SERPER_BASE_URL": chat.base_url,
    }
    srv = start_server(home, base / "langgraph-dev.log", env=env)
    try:
        ingest_sample_kb(home)
        wait_until_ready(srv)
        yield srv
    finally:
        stop_server(srv)


async def test_server_cancelled_run_then_new_question_answers_the_new_one(
    server: LocalServer, chat: ChatServer
) -> None:
    client = sdk(server.url)
    thread = (await client.threads.create())["thread_id"]
    hung_before = chat.hung
    run = await client.runs.create(
        thread, "hybrid_rag", input={"question": KB_QUESTION},
        context={"model": "openai:hung", "search_provider": "none"},
    )  # fmt: skip
    for _ in range(int(HANG_GUARD_S / 0.2)):  # until its first model call hangs
        if chat.hung > hung_before:
            break
        await asyncio.sleep(0.2)
    assert chat.hung > hung_before
    await client.runs.cancel(thread, run["run_id"], wait=True)
    out = await client.runs.wait(
        thread, "hybrid_rag", input={"question": NEW_QUESTION}, context=OFFLINE_KB
    )
    assert isinstance(out, dict) and out["question"] == NEW_QUESTION, out
    assert out["messages"][-2]["content"] == NEW_QUESTION


async def test_server_unanswered_approval_then_new_question_answers_the_new_one(
    server: LocalServer,
) -> None:
    client = sdk(server.url)
    thread = (await client.threads.create())["thread_id"]
    await client.runs.wait(
        thread, "hybrid_rag", input={"question": WEB_QUESTION},
        context={"model": "offline", "approve_web_search": True},
    )  # fmt: skip
    assert (await client.threads.get_state(thread))["next"] == ["search_web"]
    out = await client.runs.wait(
        thread, "hybrid_rag", input={"question": NEW_QUESTION}, context=OFFLINE_KB
    )
    assert isinstance(out, dict) and out["question"] == NEW_QUESTION, out


@pytest.mark.parametrize(
    "context",
    [{"data_home": "CALLER_DIR"}, {"chroma_host": "127.0.0.1", "chroma_port": 9}],
)
async def test_server_refuses_caller_chosen_paths_and_hosts(
    server: LocalServer, tmp_path: Path, context: dict[str, Any]
) -> None:
    client = sdk(server.url)
    target = tmp_path / "caller-chose-this"
    context = {k: str(target) if v == "CALLER_DIR" else v for k, v in context.items()}
    # Refused before any run starts (server/request_guard.py), naming the field.
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.runs.wait(
            None, "hybrid_rag", input={"question": KB_QUESTION}, context={**OFFLINE_KB, **context}
        )
    assert refused.value.response.status_code == 422
    assert "set per deployment" in refused.value.response.text
    assert not target.exists()  # nothing created where the caller pointed
    # an assistant carrying them is refused the same way
    with pytest.raises(httpx.HTTPStatusError) as assistant:
        await client.assistants.create("hybrid_rag", context=context)
    assert assistant.value.response.status_code == 422


async def test_server_citations_and_state_hold_no_server_path(server: LocalServer) -> None:
    client = sdk(server.url)
    thread = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(
        thread, "hybrid_rag", input={"question": KB_QUESTION}, context=OFFLINE_KB
    )
    assert isinstance(out, dict) and out["citations"], out
    assert all(c["path"] == c["doc_id"] for c in out["citations"])
    state = await client.threads.get_state(thread)
    assert str(SAMPLE_KB.parent) not in json.dumps(state)


async def test_server_refuses_configurable_keys_a_client_may_not_set(server: LocalServer) -> None:
    """Deny by default (issue 53): the context schema's fields pass, anything else (here
    ``user_id``, which platforms mirror but no client sets) is a 422 naming it."""
    client = sdk(server.url)
    for graph_id in ("hybrid_rag", "tool_agent"):
        refused = httpx.post(
            f"{server.url}/runs/wait",
            json={"assistant_id": graph_id, "input": {"question": KB_QUESTION},
                  "config": {"configurable": {"user_id": "u1", "model": "offline"}}},
            timeout=60,
        )  # fmt: skip
        assert refused.status_code == 422 and "user_id" in refused.text
        out = await client.runs.wait(
            None, graph_id, input={"question": KB_QUESTION},
            config={"configurable": {"model": "offline", "search_provider": "none"}},
            raise_error=False,
        )  # fmt: skip
        assert "__error__" not in out, out
        assert "18 days" in out["answer"]


async def test_server_hung_model_answers_at_the_run_deadline(
    server: LocalServer, chat: ChatServer
) -> None:
    client = sdk(server.url)
    for graph_id in ("hybrid_rag", "tool_agent"):
        out = await asyncio.wait_for(
            client.runs.wait(
                None, graph_id, input={"question": KB_QUESTION},
                context={"model": "openai:hung", "search_provider": "none", "run_timeout_s": 3},
                raise_error=False,
            ),
            HANG_GUARD_S,
        )  # fmt: skip
        assert "__error__" not in out, out
        assert "The run deadline (3 s) was reached" in out["answer"], out["answer"]
        assert not any("run deadline" in w for w in out["warnings"])  # said once


async def test_server_streams_one_answer_bubble_when_the_check_changes_the_draft(
    server: LocalServer,
) -> None:
    client = sdk(server.url)
    for graph_id in ("hybrid_rag", "tool_agent"):
        thread = (await client.threads.create())["thread_id"]
        streamed: list[dict[str, Any]] = []
        async for part in client.runs.stream(
            thread, graph_id, input={"question": KB_QUESTION},
            context={"search_provider": "none"},  # 'auto': the local chat model
            stream_mode=["messages-tuple", "values"],
        ):  # fmt: skip
            assert part.event != "error", part.data
            if part.event == "messages":
                streamed.append(part.data[0])
        state = (await client.threads.get_state(thread))["values"]
        answer = state["answer"]
        assert "[internal-9]" not in answer and answer != DRAFT, answer  # the check changed it
        # AIMessageChunk (the draft's tokens) or ai (a node's message): one id, one bubble
        bubbles = {m["id"] for m in streamed if m["type"].lower().startswith("ai")}
        final_ai = [m for m in state["messages"] if m["type"] == "ai" and m["content"]]
        assert len(bubbles) == 1, (graph_id, streamed)
        assert bubbles == {final_ai[-1]["id"]}, graph_id
        assert without_sources(final_ai[-1]["content"]) == answer


async def test_server_chinese_question_gets_chinese_warnings(server: LocalServer) -> None:
    client = sdk(server.url)
    out = await client.runs.wait(
        None, "hybrid_rag", input={"question": "今天上海的天气怎么样？"}, context=OFFLINE_KB
    )
    assert isinstance(out, dict) and out["language"] == "zh"
    assert "网络搜索已关闭" in out["answer"], out["answer"]
    assert not any("web search" in w or "网络搜索" in w for w in out["warnings"])  # said once


def test_server_keeps_its_state_outside_the_repo(server: LocalServer) -> None:
    assert not server.cwd.resolve().is_relative_to(REPO)
    assert (server.cwd / ".langgraph_api").is_dir()  # where this server keeps its threads

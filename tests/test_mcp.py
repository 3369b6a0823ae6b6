"""Both graphs as MCP tools: langgraph-api's ``/mcp`` endpoint of a real ``langgraph dev``
(offline, the sample KB ingested), listed and called with the ``mcp`` Python client over
streamable HTTP; and the client snippet of docs/DEPLOYMENT.md run against the same server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.langgraph_server import (
    REPO,
    SAMPLE_KB,
    LocalServer,
    agent_graph_available,
    sdk,
    serving,
    serving_sample_kb,
)
from tests.test_docs import BLOCKS

mcp = pytest.importorskip("mcp", reason="the 'mcp' client is in the dev extra")
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

QUESTION = "How many days of annual leave after 6 years of service?"
DOC_URL = "http://127.0.0.1:2025/mcp"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    if not SAMPLE_KB.exists():
        pytest.skip("examples/kb is missing")
    with serving_sample_kb(tmp_path_factory.mktemp("mcp")) as srv:
        yield srv


async def mcp_session(url: str, work: Any) -> Any:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await work(session)


async def test_both_graphs_are_tools_with_usable_schemas(server: LocalServer) -> None:
    async def listing(session: Any) -> Any:
        return (await session.list_tools()).tools

    tools = {t.name: t for t in await mcp_session(server.url + "/mcp", listing)}
    expected = {"hybrid_rag", "tool_agent"} if agent_graph_available() else {"hybrid_rag"}
    assert expected <= set(tools)
    for name in expected:
        tool = tools[name]
        # What a calling model reads: when to call it and what to send.
        assert "knowledge base" in tool.description and '{"question"' in tool.description
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert schema["properties"]["question"]["type"] == "string"
        assert "question to answer" in schema["properties"]["question"]["description"]


async def test_calling_a_graph_tool_answers_with_numbered_sources(server: LocalServer) -> None:
    async def call(session: Any) -> Any:
        return await session.call_tool("hybrid_rag", {"question": QUESTION})

    result = await mcp_session(server.url + "/mcp", call)
    assert not result.is_error
    text = result.content[0].text
    answer, _, sources = text.partition("\n\nSources:\n")
    assert "18 days" in answer and "[internal-1]" in answer
    assert sources.startswith("[internal-1] ") and ".md" in sources.splitlines()[0]
    assert "{'" not in text and "HumanMessage" not in text  # not the state's repr
    assert len(text) < 2000
    structured = result.structured_content
    assert structured["answer"] == answer
    assert structured["sources"][0]["label"] == "[internal-1]"
    assert structured["sources"][0]["path"].endswith(".md")


async def test_a_bad_call_is_an_error_saying_what_is_wrong(server: LocalServer) -> None:
    async def calls(session: Any) -> tuple[Any, Any, Any]:
        empty = await session.call_tool("hybrid_rag", {"question": "   "})
        wrong = await session.call_tool("hybrid_rag", {"query": QUESTION})
        try:
            unknown = await session.call_tool("no_such_graph", {"question": QUESTION})
        except Exception as exc:  # the client raises the server's JSON-RPC error
            unknown = exc
        return empty, wrong, unknown

    empty, wrong, unknown = await mcp_session(server.url + "/mcp", calls)
    assert empty.is_error and "question is missing or empty" in empty.content[0].text
    assert wrong.is_error and "unknown argument(s) query" in wrong.content[0].text
    assert "Unknown tool: no_such_graph (hybrid_rag" in str(getattr(unknown, "content", unknown))


async def test_duplicate_assistant_names_get_unique_stable_tools(server: LocalServer) -> None:
    """Two assistants of one name (the docs' snippets in order made two) broke every call
    with "Multiple tools found with the same name"; without a users file every caller is
    the same local user, so MCP lists only the graphs."""
    client = sdk(server.url)
    first = await client.assistants.create("hybrid_rag", name="hr helper")
    second = await client.assistants.create("hybrid_rag", name="hr helper")

    async def listing(session: Any) -> Any:
        return [t.name for t in (await session.list_tools()).tools]

    names = await mcp_session(server.url + "/mcp", listing)
    assert "hybrid_rag" in names and len(names) == len(set(names))
    assert not any(n.startswith("hr_helper") for n in names)  # nobody's own: not listed
    from server.mcp_tools import named_tools

    tools = named_tools([second, first, *await client.assistants.search(limit=50)])
    assert tools["hr_helper"]["assistant_id"] == first["assistant_id"]  # the oldest
    assert (
        tools[f"hr_helper_{second['assistant_id'][:8]}"]["assistant_id"] == second["assistant_id"]
    )
    assert tools["hybrid_rag"]["metadata"]["created_by"] == "system"


async def test_the_documents_tool_lists_what_the_knowledge_base_holds(
    server: LocalServer,
) -> None:
    async def calls(session: Any) -> tuple[Any, Any, Any, Any, Any]:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        everything = await session.call_tool("kb_documents", {})
        leave = await session.call_tool("kb_documents", {"contains": "annual-leave"})
        one = await session.call_tool("kb_documents", {"limit": 1})
        bad = await session.call_tool("kb_documents", {"limit": 0, "question": "x"})
        return listed, everything, leave, one, bad

    listed, everything, leave, one, bad = await mcp_session(server.url + "/mcp", calls)
    tool = listed["kb_documents"]
    assert "documents" in tool.description and tool.input_schema["additionalProperties"] is False
    assert tool.annotations.read_only_hint
    paths = {d["path"] for d in everything.structured_content["documents"]}
    sample = {str(p.relative_to(SAMPLE_KB)) for p in SAMPLE_KB.rglob("*") if p.is_file()}
    assert not everything.is_error and paths == sample
    assert everything.structured_content["total"] == len(sample)
    assert "hr/annual-leave.md — " in everything.content[0].text
    assert {d["path"] for d in leave.structured_content["documents"]} == {
        "hr/annual-leave.md",
        "hr/annual-leave-zh.md",
    }
    assert len(one.structured_content["documents"]) == 1
    assert f"1 of {len(sample)} documents" in one.content[0].text
    assert bad.is_error and "unknown argument(s) question" in bad.content[0].text


async def test_the_documents_tool_on_an_empty_data_home(tmp_path: Path) -> None:
    """A fresh install, nothing ingested: an empty list that says so, not an error."""
    home = tmp_path / "home"
    home.mkdir()

    async def call(session: Any) -> Any:
        return await session.call_tool("kb_documents", {})

    with serving(home, tmp_path / "langgraph-dev.log") as srv:
        listed = await mcp_session(srv.url + "/mcp", call)
    assert not listed.is_error
    assert listed.structured_content == {"documents": [], "total": 0}
    assert listed.content[0].text == "The knowledge base holds no document you may read."


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (None, None),
        ({}, None),
        ({"contains": "leave", "limit": 200}, None),
        ([], "arguments must be an object"),
        ({"limit": 0}, "limit must be a whole number in 1..200, got 0"),
        ({"limit": True}, "limit must be a whole number"),
        ({"limit": "5"}, "limit must be a whole number"),
        ({"contains": 3}, "contains must be text"),
        ({"query": "x"}, "unknown argument(s) query"),
        # ~65k characters: once an HTTP 500 and a reset connection (an over-long URL).
        ({"contains": "x" * 65_000}, "contains is 65,000 characters, over the limit of 500"),
    ],
)
def test_the_documents_tool_names_a_bad_argument(arguments: Any, problem: str | None) -> None:
    from server.mcp_documents import bad_arguments

    found = bad_arguments(arguments)
    assert found == problem if problem is None else problem in (found or "")


def test_an_assistant_cannot_take_the_documents_tools_name() -> None:
    from server.mcp_tools import named_tools

    mine = {"assistant_id": "abcdef1234", "name": "kb documents", "metadata": {}}
    assert set(named_tools([mine])) == {"kb_documents_abcdef12"}


def mcp_blocks() -> tuple[Any, Any]:
    """The client config (json) and the client snippet (python) of the MCP section."""
    config = [b for b in BLOCKS if b.lang == "json" and "mcpServers" in b.code]
    client = [b for b in BLOCKS if b.kind == "python" and "streamable_http_client" in b.code]
    assert len(config) == 1 and len(client) == 1, "docs/DEPLOYMENT.md's MCP section"
    return config[0], client[0]


def test_the_documented_client_config_names_the_snippets_endpoint() -> None:
    config, client = mcp_blocks()
    servers = json.loads(config.code)["mcpServers"]
    assert servers["hybrid-rag"]["url"] == DOC_URL
    assert f'"{DOC_URL}"' in client.code


def test_the_documented_mcp_client_runs(server: LocalServer, tmp_path: Any) -> None:
    _, client = mcp_blocks()
    script = tmp_path / "mcp_client.py"
    script.write_text(client.code.replace(DOC_URL, server.url + "/mcp"), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "hybrid_rag - " in done.stdout and "18 days" in done.stdout

"""The production server of docs/DEPLOYMENT.md §4 for real: Aegra (``aegra-api``) started
from the project's own ``server/aegra.json`` on loopback, threads and assistants in a real
PostgreSQL (tests/servers.py), two users of a users file. Both graphs answer each user
from their own documents only; another user's thread is not found; the server restarts
and the threads, their state and the access rules are intact; MCP answers there too; the
server refuses to start without a users file; ``server/aegra.json`` is what ``langgraph.json``
makes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.aegra_config import render
from tests.langgraph_server import REPO, agent_graph_available
from tests.ports import free_port
from tests.production_server import Production, production_command, production_env
from tests.servers import PostgresServer
from tests.team_kb import ASK_ALICE_FACT, ASK_BOB_FACT, team_kb
from tools.access.users import add_user

pytest.importorskip("aegra_api", reason="the production server (aegra-api) is in the dev extra")


@pytest.fixture(scope="module")
def served(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Production, dict[str, str]]]:
    base = tmp_path_factory.mktemp("production")
    home, users, tokens = team_kb(base)
    database = postgres_server.create_database("aegra")
    env = production_env(home, database, users)
    server = Production(f"http://127.0.0.1:{free_port()}", env, base / "aegra.log")
    try:
        yield server.start(), tokens
    finally:
        server.stop()


def client(served: tuple[Production, dict[str, str]], user: str) -> Any:
    from langgraph_sdk import get_client

    server, tokens = served
    headers = {"Authorization": f"Bearer {tokens[user]}"}
    return get_client(url=server.url, api_key=None, headers=headers, timeout=300)


async def ask(c: Any, graph: str, question: str) -> tuple[str, str]:
    thread = await c.threads.create()
    out = await c.runs.wait(thread["thread_id"], graph, input={"question": question})
    return thread["thread_id"], json.dumps(out, ensure_ascii=False)


def test_server_aegra_json_is_made_from_langgraph_json() -> None:
    assert (REPO / "server" / "aegra.json").read_text(encoding="utf-8") == render(), (
        "server/aegra.json is stale: run .venv/bin/python -m server.aegra_config"
    )


async def test_two_users_both_graphs_threads_and_access_survive_a_restart(
    served: tuple[Production, dict[str, str]],
) -> None:
    from langgraph_sdk.errors import NotFoundError

    server, _ = served
    alice, bob = client(served, "alice"), client(served, "bob")
    graphs = ["hybrid_rag", "tool_agent"] if agent_graph_available() else ["hybrid_rag"]
    threads: dict[str, str] = {}
    for graph in graphs:
        threads[graph], mine = await ask(alice, graph, ASK_ALICE_FACT)
        assert "ZEBRA-17" in mine
        _, not_mine = await ask(bob, graph, ASK_ALICE_FACT)
        assert "ZEBRA" not in not_mine and "pay.md" not in not_mine
    _, bobs = await ask(bob, "hybrid_rag", ASK_BOB_FACT)
    assert "QUOKKA-42" in bobs
    server.stop()
    server.start()  # same database: threads and assistants are in PostgreSQL
    for graph, thread_id in threads.items():
        state = await alice.threads.get_state(thread_id)
        assert "ZEBRA-17" in json.dumps(state["values"], ensure_ascii=False), graph
        with pytest.raises(NotFoundError):
            await bob.threads.get(thread_id)
    listed = {t["thread_id"] for t in await bob.threads.search(limit=100)}
    assert not listed & set(threads.values())
    await another_users_thread_is_closed(bob, threads["hybrid_rag"])
    refused = httpx.post(f"{server.url}/threads/search", json={}, timeout=30)
    assert refused.status_code == 401
    # the thread goes on after the restart, still as alice
    more = await alice.runs.wait(
        threads["hybrid_rag"], "hybrid_rag", input={"question": ASK_ALICE_FACT}
    )
    assert "ZEBRA-17" in json.dumps(more)


async def another_users_thread_is_closed(intruder: Any, thread_id: str) -> None:
    """Every way into a thread: reading it, its state and history, its runs, and running
    on it (a run's output is the thread's state: Aegra 0.6 let any user run on any thread)."""
    attempts = {
        "state": lambda: intruder.threads.get_state(thread_id),
        "history": lambda: intruder.threads.get_history(thread_id),
        "runs": lambda: intruder.runs.list(thread_id),
        "create": lambda: intruder.runs.create(thread_id, "hybrid_rag", input={"question": "and?"}),
        "wait": lambda: intruder.runs.wait(thread_id, "hybrid_rag", input={"question": "and?"}),
        "update_state": lambda: intruder.threads.update_state(thread_id, {"answer": "forged"}),
        "update": lambda: intruder.threads.update(thread_id, metadata={"title": "forged"}),
        "copy": lambda: intruder.threads.copy(thread_id),
        "delete": lambda: intruder.threads.delete(thread_id),
    }
    for name, attempt in attempts.items():
        try:
            got = await attempt()
        except httpx.HTTPStatusError as exc:  # the SDK's errors are httpx's
            assert exc.response.status_code in (403, 404), (name, exc.response.status_code)
            continue
        assert "ZEBRA" not in json.dumps(got) and not got, (name, got)
    streamed = []
    try:
        async for part in intruder.runs.stream(thread_id, "hybrid_rag", input={"question": "and?"}):
            streamed.append(part)
    except httpx.HTTPStatusError as exc:
        assert exc.response.status_code in (403, 404)
    assert "ZEBRA" not in json.dumps([list(p) for p in streamed], default=str)


async def test_deployment_and_misspelt_context_fields_are_refused(
    served: tuple[Production, dict[str, str]],
) -> None:
    alice = client(served, "alice")
    thread = await alice.threads.create()
    for context, named in (
        ({"data_home": "/etc"}, "data_home"),
        ({"chroma_host": "169.254.169.254"}, "chroma_host"),
        ({"confidnce_threshold": 0.5}, "confidnce_threshold"),
    ):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await alice.runs.wait(thread["thread_id"], "hybrid_rag",
                                  input={"question": ASK_ALICE_FACT}, context=context)  # fmt: skip
        assert refused.value.response.status_code == 422 and named in refused.value.response.text
        with pytest.raises(httpx.HTTPStatusError) as assistant:
            await alice.assistants.create("hybrid_rag", name="x", context=context)
        assert assistant.value.response.status_code == 422
    fine = await alice.runs.wait(thread["thread_id"], "hybrid_rag",
                                 input={"question": ASK_ALICE_FACT}, context={"top_k_internal": 3})  # fmt: skip
    assert "ZEBRA-17" in json.dumps(fine)


async def test_mcp_on_the_production_server(served: tuple[Production, dict[str, str]]) -> None:
    pytest.importorskip("mcp", reason="the 'mcp' client is in the dev extra")
    import httpx2  # type: ignore[import-not-found]
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    server, tokens = served
    headers = {"Authorization": f"Bearer {tokens['bob']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=300) as http,
        streamable_http_client(server.url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = (await session.list_tools()).tools
        names = [t.name for t in tools]
        described = next(t.description for t in tools if t.name == "hybrid_rag")
        result = await session.call_tool("hybrid_rag", {"question": ASK_BOB_FACT})
        listed = await session.call_tool("kb_documents", {})
    assert "hybrid_rag" in names and "kb_documents" in names and len(names) == len(set(names))
    bobs = {d["path"] for d in listed.structured_content["documents"]}
    assert any(p.endswith("budget.md") for p in bobs)
    assert not any(p.endswith("pay.md") for p in bobs)  # alice's
    assert "knowledge base" in described and '{"question"' in described  # langgraph.json's
    assert "QUOKKA-42" in result.content[0].text and "Sources:" in result.content[0].text


def test_the_page_is_served_without_a_token_while_the_api_needs_one(
    served: tuple[Production, dict[str, str]],
) -> None:
    server, tokens = served
    page = httpx.get(f"{server.url}/ui", follow_redirects=True, timeout=30)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    modules = sorted((REPO / "web").glob("*.js"))
    assert modules
    for module in modules:  # every ES module the page imports, and its stylesheet
        got = httpx.get(f"{server.url}/ui/{module.name}", timeout=30)
        assert got.status_code == 200, module.name
        assert "javascript" in got.headers["content-type"], module.name
    assert httpx.get(f"{server.url}/ui/style.css", timeout=30).status_code == 200
    for method, path in (("POST", "/threads/search"), ("GET", "/kb/documents")):
        assert httpx.request(method, server.url + path, json={}, timeout=30).status_code == 401
        signed = {"Authorization": f"Bearer {tokens['alice']}"}
        answered = httpx.request(method, server.url + path, json={}, headers=signed, timeout=30)
        assert answered.status_code == 200, (path, answered.text)


def test_the_server_will_not_start_without_a_users_file(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    env = production_env(tmp_path, postgres_server.create_database("aegra_open"), None)
    done = subprocess.run(
        production_command(free_port()), cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "refusing to start without a users file" in done.stdout + done.stderr
    assert "HYBRID_RAG_OPEN=1" in done.stdout + done.stderr


def test_the_startup_check_names_what_the_server_enforces(tmp_path: Path) -> None:
    from server.aegra_app import startup_check
    from tools.errors import ConfigError

    with pytest.raises(ConfigError, match="refusing to start without a users file"):
        startup_check({})
    assert startup_check({"HYBRID_RAG_OPEN": "1"}).startswith("open: no users file")
    users = tmp_path / "users.json"
    with pytest.raises(ConfigError, match="does not exist"):
        startup_check({"HYBRID_RAG_USERS_FILE": str(users)})
    add_user(users, "alice")
    assert "1 user(s)" in startup_check({"HYBRID_RAG_USERS_FILE": str(users)})

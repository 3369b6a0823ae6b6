"""Per-user access through a real ``langgraph dev`` and the SDK: two users, a document
each, and a shared one. User A never sees B's document by any route (the state graph,
the agent's tool, a stream, B's thread and its history, MCP), and each still finds their
own; a request without a known token is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.langgraph_server import (
    LocalServer,
    agent_graph_available,
    serving,
)
from tests.team_kb import ASK_ALICE_FACT, ASK_BOB_FACT, team_kb


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalServer, dict[str, str]]]:
    base = tmp_path_factory.mktemp("access")
    home, users, tokens = team_kb(base)
    env = {"HYBRID_RAG_USERS_FILE": str(users)}
    with serving(home, base / "langgraph-dev.log", env) as srv:
        yield srv, tokens


def client(served: tuple[LocalServer, dict[str, str]], user: str) -> Any:
    from langgraph_sdk import get_client

    srv, tokens = served
    return get_client(url=srv.url, headers={"Authorization": f"Bearer {tokens[user]}"})


def dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


async def ask(
    served: tuple[LocalServer, dict[str, str]], user: str, graph: str, question: str
) -> tuple[str, str, str]:
    """A run on a new thread of ``user``, streamed: (thread id, everything streamed, the
    final state)."""
    c = client(served, user)
    thread = await c.threads.create()
    streamed = [
        dump(part)
        async for part in c.runs.stream(
            thread["thread_id"],
            graph,
            input={"question": question},
            stream_mode=["values", "updates", "messages-tuple", "custom", "debug"],
        )
    ]
    state = await c.threads.get_state(thread["thread_id"])
    return thread["thread_id"], "\n".join(streamed), dump(state)


async def test_a_request_without_a_known_token_is_refused(
    served: tuple[LocalServer, dict[str, str]],
) -> None:
    srv, _ = served
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        r = httpx.post(f"{srv.url}/assistants/search", json={}, headers=headers, timeout=30)
        assert r.status_code == 401, r.text
    # Studio's header does not bypass the check (disable_studio_auth).
    r = httpx.post(
        f"{srv.url}/assistants/search",
        json={},
        headers={"x-auth-scheme": "langsmith"},
        timeout=30,
    )
    assert r.status_code == 401


@pytest.mark.parametrize("graph", ["hybrid_rag", "tool_agent"])
async def test_each_user_finds_their_document_and_never_the_others(
    served: tuple[LocalServer, dict[str, str]], graph: str
) -> None:
    if graph == "tool_agent" and not agent_graph_available():
        pytest.skip("the agent graph cannot be imported here")
    _, alice_sees_bobs, _ = await ask(served, "alice", graph, ASK_BOB_FACT)
    assert "QUOKKA" not in alice_sees_bobs and "budget.md" not in alice_sees_bobs
    _, bob_sees_alices, _ = await ask(served, "bob", graph, ASK_ALICE_FACT)
    assert "ZEBRA" not in bob_sees_alices and "pay.md" not in bob_sees_alices
    # Each still finds their own (the filter is not "nothing").
    _, _, alice_state = await ask(served, "alice", graph, ASK_ALICE_FACT)
    assert "ZEBRA-17" in alice_state
    _, _, bob_state = await ask(served, "bob", graph, ASK_BOB_FACT)
    assert "QUOKKA-42" in bob_state


async def test_another_users_thread_is_not_found(
    served: tuple[LocalServer, dict[str, str]],
) -> None:
    from langgraph_sdk.errors import NotFoundError

    bob_thread, _, _ = await ask(served, "bob", "hybrid_rag", ASK_BOB_FACT)
    alice = client(served, "alice")
    for read in (
        lambda: alice.threads.get(bob_thread),
        lambda: alice.threads.get_state(bob_thread),
        lambda: alice.threads.get_history(bob_thread),
        lambda: alice.runs.list(bob_thread),
        lambda: alice.runs.wait(bob_thread, "hybrid_rag", input={"question": "and?"}),
    ):
        try:
            got = await read()
        except NotFoundError:
            continue
        except httpx.HTTPStatusError as exc:  # older SDKs raise the httpx error
            assert exc.response.status_code in (403, 404)
            continue
        assert "QUOKKA" not in dump(got) and got in ([], None), got
    listed = await alice.threads.search(limit=100)
    assert bob_thread not in {t["thread_id"] for t in listed}
    assert "QUOKKA" not in dump(listed)


async def test_assistants_are_owned_and_the_graphs_own_are_shared(
    served: tuple[LocalServer, dict[str, str]],
) -> None:
    from langgraph_sdk.errors import NotFoundError

    alice, bob = client(served, "alice"), client(served, "bob")
    mine = await alice.assistants.create(
        "hybrid_rag", name="alice-only", context={"top_k_internal": 3}
    )
    bobs_view = {a["assistant_id"] for a in await bob.assistants.search(limit=100)}
    assert mine["assistant_id"] not in bobs_view
    graph_ids = {a["graph_id"] for a in await bob.assistants.search(limit=100)}
    assert "hybrid_rag" in graph_ids  # the system assistants: usable by all
    with pytest.raises(NotFoundError):
        await bob.assistants.get(mine["assistant_id"])
    with pytest.raises(NotFoundError):
        await bob.assistants.update(mine["assistant_id"], name="taken")
    system = next(
        a for a in await bob.assistants.search(limit=100) if a["graph_id"] == "hybrid_rag"
    )
    with pytest.raises(NotFoundError):  # shared, but nobody's to change
        await bob.assistants.delete(system["assistant_id"])
    assert (await alice.assistants.get(mine["assistant_id"]))["name"] == "alice-only"


async def test_mcp_calls_run_as_the_caller(served: tuple[LocalServer, dict[str, str]]) -> None:
    mcp = pytest.importorskip("mcp", reason="the 'mcp' client is in the dev extra")
    from mcp.client.streamable_http import streamable_http_client

    srv, tokens = served
    import httpx2  # type: ignore[import-not-found]

    async def call(token: str) -> str:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(srv.url + "/mcp", http_client=http) as (read, write),
            mcp.ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("hybrid_rag", {"question": ASK_BOB_FACT})
            listed = await session.call_tool("kb_documents", {})
            return dump([c.model_dump() for c in [*result.content, *listed.content]])

    alices, bobs = await call(tokens["alice"]), await call(tokens["bob"])
    assert "QUOKKA" not in alices and "budget.md" not in alices and "pay.md" in alices
    assert "QUOKKA-42" in bobs and "budget.md" in bobs and "pay.md" not in bobs


async def test_mcp_lists_the_graphs_and_the_callers_own_assistants(
    served: tuple[LocalServer, dict[str, str]],
) -> None:
    pytest.importorskip("mcp", reason="the 'mcp' client is in the dev extra")
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    srv, tokens = served
    import httpx2  # type: ignore[import-not-found]

    await client(served, "bob").assistants.create("hybrid_rag", name="budget bot")

    async def names(token: str) -> list[str]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(srv.url + "/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return [t.name for t in (await session.list_tools()).tools]

    graphs = {"hybrid_rag", "tool_agent"} if agent_graph_available() else {"hybrid_rag"}
    assert graphs | {"budget_bot"} <= set(await names(tokens["bob"]))
    alices = await names(tokens["alice"])
    assert graphs <= set(alices) and "budget_bot" not in alices
    refused = httpx.post(
        srv.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": "Bearer wrong", "Accept": "application/json"},
    )
    assert refused.status_code == 401 and "unknown bearer token" in refused.text

"""Per-user access through both real servers, ``langgraph dev`` and the production
server Aegra (with PostgreSQL), and the SDK: two users, a document each, and a shared one.
Every test runs on both (issue 53: the access matrix of the server a team deploys). User A
never sees B's document by any route (the state graph, the agent's tool, a stream, B's
thread and its history, MCP, the document API, collections), and each still finds their
own; no client can name its own identity or take ownership; a request without a known
token is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.langgraph_server import agent_graph_available, serving
from tests.ports import free_port
from tests.production_server import Production, production_env
from tests.team_kb import ASK_ALICE_FACT, ASK_BOB_FACT, team_kb

SERVERS = ["langgraph-dev", "aegra"]


class Served:
    """A running server (either kind) and the users' tokens."""

    def __init__(self, kind: str, url: str, tokens: dict[str, str]) -> None:
        self.kind, self.url, self.tokens = kind, url, tokens

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}


@pytest.fixture(scope="module", params=SERVERS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    kind = str(request.param)
    base = tmp_path_factory.mktemp(kind)
    home, users, tokens = team_kb(base)
    if kind == "langgraph-dev":
        env = {"HYBRID_RAG_USERS_FILE": str(users)}
        with serving(home, base / "langgraph-dev.log", env) as srv:
            yield Served(kind, srv.url, tokens)
        return
    pytest.importorskip("aegra_api", reason="the production server (aegra-api) is in the dev extra")
    postgres = request.getfixturevalue("postgres_server")
    env = production_env(home, postgres.create_database(f"access_{free_port()}"), users)
    production = Production(f"http://127.0.0.1:{free_port()}", env, base / "aegra.log")
    try:
        yield Served(kind, production.start().url, tokens)
    finally:
        production.stop()


def client(served: Served, user: str) -> Any:
    from langgraph_sdk import get_client

    return get_client(url=served.url, api_key=None, headers=served.headers(user), timeout=300)


def dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


async def ask(served: Served, user: str, graph: str, question: str) -> tuple[str, str, str]:
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
    served: Served,
) -> None:
    srv = served
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
    served: Served, graph: str
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
    served: Served,
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
    served: Served,
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


async def test_mcp_calls_run_as_the_caller(served: Served) -> None:
    mcp = pytest.importorskip("mcp", reason="the 'mcp' client is in the dev extra")
    from mcp.client.streamable_http import streamable_http_client

    srv, tokens = served, served.tokens
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
    served: Served,
) -> None:
    pytest.importorskip("mcp", reason="the 'mcp' client is in the dev extra")
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    srv, tokens = served, served.tokens
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


OVERRIDES = [
    {"config": {"configurable": {"langgraph_auth_user": None}}},  # the finding's request
    {"context": {"langgraph_auth_user": None}},
    {"context": {"langgraph_auth_user": {"identity": "bob", "kb_access": "all"}}},
    {"config": {"configurable": {"kb_access": "all"}}},
    {"checkpoint": {"langgraph_auth_user": None}},
]


@pytest.mark.parametrize("graph", ["hybrid_rag", "tool_agent"])
@pytest.mark.parametrize("override", OVERRIDES)
def test_a_client_cannot_name_its_own_identity_or_access(
    served: Served, graph: str, override: dict[str, Any]
) -> None:
    """Bob (no group) on his own thread, asking for hr's document with an identity of his
    own making: refused naming the key, and nothing of hr's in the answer (issue 53: on
    Aegra this answered with hr/pay.md)."""
    bob = served.headers("bob")
    thread = httpx.post(f"{served.url}/threads", json={}, headers=bob, timeout=30).json()
    body = {"assistant_id": graph, "input": {"question": ASK_ALICE_FACT}, **override}
    r = httpx.post(
        f"{served.url}/threads/{thread['thread_id']}/runs/wait", json=body, headers=bob,
        timeout=300,
    )  # fmt: skip
    assert r.status_code == 422, r.text
    assert "may not be set by a client" in r.text and "ZEBRA" not in r.text
    # An assistant carrying it is refused too (its config is merged into every run).
    keys = (
        override.get("context") or override.get("checkpoint") or override["config"]["configurable"]
    )
    config = {"configurable": keys}
    made = httpx.post(
        f"{served.url}/assistants", json={"graph_id": graph, "config": config}, headers=bob,
        timeout=30,
    )  # fmt: skip
    assert made.status_code == 422, made.text


def test_ownership_is_set_by_the_server_and_cannot_be_handed_over(served: Served) -> None:
    """Bob cannot hand his thread or assistant to alice (it appeared in her list and her
    MCP tools), nor share an assistant with everyone as the graphs' own are."""
    bob, alice = served.headers("bob"), served.headers("alice")
    url = served.url
    thread = httpx.post(f"{url}/threads", json={"metadata": {"title": "t"}}, headers=bob).json()
    for metadata in ({"owner": "alice"}, {"created_by": "system"}):
        patched = httpx.patch(
            f"{url}/threads/{thread['thread_id']}", json={"metadata": metadata}, headers=bob
        )
        assert patched.status_code == 422 and "set by the server" in patched.text
        made = httpx.post(f"{url}/threads", json={"metadata": metadata}, headers=bob, timeout=30)
        assert made.status_code == 422
    made = httpx.post(
        f"{url}/assistants",
        # Aegra derives an assistant's id from its graph and settings: settings of its own.
        json={"graph_id": "hybrid_rag", "name": "bobs", "context": {"top_k_internal": 7}},
        headers=bob,
    )
    assert made.status_code == 200, made.text
    assistant = made.json()
    patched = httpx.patch(
        f"{url}/assistants/{assistant['assistant_id']}",
        json={"metadata": {"owner": "alice"}, "description": "hers now"}, headers=bob,
    )  # fmt: skip
    assert patched.status_code == 422
    theirs = httpx.post(f"{url}/threads/search", json={"limit": 100}, headers=alice).json()
    assert thread["thread_id"] not in {t["thread_id"] for t in theirs}
    listed = httpx.post(f"{url}/assistants/search", json={"limit": 100}, headers=alice).json()
    assert assistant["assistant_id"] not in {a["assistant_id"] for a in listed}


def test_the_document_api_shows_each_user_only_their_documents(served: Served) -> None:
    """/kb, collections and /admin on both servers: bob never lists, reads or opens hr's
    document; alice does; neither is an admin."""
    url, bob, alice = served.url, served.headers("bob"), served.headers("alice")
    bobs = httpx.get(f"{url}/kb/documents", headers=bob, timeout=30).json()
    alices = httpx.get(f"{url}/kb/documents", headers=alice, timeout=30).json()
    assert "hr/pay.md" not in {d["doc_id"] for d in bobs["documents"]}
    assert "finance/budget.md" in {d["doc_id"] for d in bobs["documents"]}
    assert "hr/pay.md" in {d["doc_id"] for d in alices["documents"]}
    assert "finance/budget.md" not in {d["doc_id"] for d in alices["documents"]}
    for path in ("", "/chunks", "/original"):
        r = httpx.get(f"{url}/kb/documents/hr/pay.md{path}", headers=bob, timeout=30)
        assert r.status_code == 404 and "ZEBRA" not in r.text
    assert "ZEBRA" in httpx.get(f"{url}/kb/documents/hr/pay.md/original", headers=alice).text
    made = httpx.post(
        f"{url}/kb/collections", json={"name": "pay-set", "doc_ids": ["hr/pay.md"]},
        headers=alice, timeout=30,
    )  # fmt: skip
    assert made.status_code in (200, 201), made.text
    refused = httpx.post(
        f"{url}/kb/collections", json={"name": "taken", "doc_ids": ["hr/pay.md"]},
        headers=bob, timeout=30,
    )  # fmt: skip
    assert refused.status_code == 404
    sets = httpx.get(f"{url}/kb/collections", headers=bob, timeout=30).json()["sets"]
    assert "hr/pay.md" not in json.dumps(sets)
    for user in (bob, alice):
        assert httpx.get(f"{url}/admin/users", headers=user, timeout=30).status_code == 403
        assert httpx.get(f"{url}/kb/me", headers=user, timeout=30).json()["admin"] is False
    # A run scoped to alice's set still reads as bob: nothing of hr's.
    thread = httpx.post(f"{url}/threads", json={}, headers=bob, timeout=30).json()
    r = httpx.post(
        f"{url}/threads/{thread['thread_id']}/runs/wait",
        json={"assistant_id": "hybrid_rag", "input": {"question": ASK_ALICE_FACT},
              "context": {"scope": "set:pay-set"}},
        headers=bob, timeout=300,
    )  # fmt: skip
    assert "ZEBRA" not in r.text


def test_votes_only_on_ones_own_threads(served: Served) -> None:
    """Feedback on both servers: bob cannot vote on alice's answer (it changed her
    document's grade in the export and went to LangSmith on her run); alice can."""
    url, bob, alice = served.url, served.headers("bob"), served.headers("alice")
    thread = httpx.post(f"{url}/threads", json={}, headers=alice, timeout=30).json()
    vote = {"thread_id": thread["thread_id"], "answer": "ZEBRA-17 [internal-1]", "vote": "down",
            "doc_ids": ["hr/pay.md"]}  # fmt: skip
    forged = httpx.put(f"{url}/feedback", json=vote, headers=bob, timeout=30)
    assert forged.status_code == 404, forged.text
    assert "ZEBRA" not in httpx.get(f"{url}/feedback", headers=bob, timeout=30).text
    own = httpx.put(f"{url}/feedback", json={**vote, "vote": "up"}, headers=alice, timeout=30)
    assert own.status_code == 200, own.text
    rows = httpx.get(f"{url}/feedback", headers=alice, timeout=30).json()["feedback"]
    assert [r["vote"] for r in rows if r["thread_id"] == thread["thread_id"]] == ["up"]

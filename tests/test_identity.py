"""Identity and access are the server's (issue 53 item 1): what a client may set in a run
(``server/request_guard.py``), and a reader that fails closed (``run/reader.py``).

The same requests against real servers, ``langgraph dev`` and Aegra: tests/test_access_server.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from graph import Context
from run.reader import LOCAL_OPERATOR, reader_of
from server.request_guard import RequestGuard, client_problem
from tools.access.acl import Reader

KB_QUESTION = "How many days of annual leave after 6 years of service?"


@pytest.mark.parametrize(
    "user",
    [None, {}, {"identity": ""}, {"identity": None, "kb_access": "all"}, {"kb_access": "all"},
     {"identity": 7, "kb_access": "all"}, "alice"],
)  # fmt: skip
def test_a_caller_without_an_identity_reads_nothing(user: Any) -> None:
    reader = reader_of(user)
    assert reader == Reader.nobody()
    assert not reader.may_read({"doc_id": "handbook.md"})  # public documents too
    assert not reader.may_read({"doc_id": "hr/pay.md", "acl": "group:hr"})


def test_a_named_caller_reads_by_groups_and_the_operator_reads_all() -> None:
    assert reader_of({"identity": "bob", "groups": "eng"}) == Reader.of("bob", ["eng"])
    assert reader_of(LOCAL_OPERATOR).unrestricted


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"config": {"configurable": {"langgraph_auth_user": None}}}, "langgraph_auth_user"),
        ({"context": {"langgraph_auth_user": {"identity": "x", "kb_access": "all"}}},
         "langgraph_auth_user"),
        ({"context": {"langgraph_auth_user_id": "alice"}}, "langgraph_auth_user_id"),
        ({"config": {"configurable": {"kb_access": "all"}}}, "kb_access"),
        ({"context": {"user_id": "alice"}}, "user_id"),
        ({"config": {"configurable": {"thread_id": "another"}}}, "thread_id"),
        ({"config": {"configurable": {"run_id": "r"}}}, "run_id"),
        ({"checkpoint": {"langgraph_auth_user": None}}, "langgraph_auth_user"),
        ({"checkpoint": {"thread_id": "another", "checkpoint_id": "c"}}, "checkpoint.thread_id"),
        ({"config": {"callbacks": []}}, "config.callbacks"),
        ({"config": "all"}, "config must be an object"),
        ({"context": {"data_home": "/etc"}}, "set per deployment"),
        ({"context": {"confidnce_threshold": 0.5}}, "did you mean confidence_threshold"),
        ([{"context": {"scope": ""}}, {"context": {"kb_access": "all"}}], "kb_access"),
    ],
)  # fmt: skip
def test_identity_access_and_unknown_keys_are_refused_from_a_client(body: Any, named: str) -> None:
    problem = client_problem(body, "/threads/t1/runs/wait")
    assert problem is not None and named in problem


def test_what_a_client_may_set_passes() -> None:
    for body in (
        {"input": {"question": "q"}, "context": {"scope": "folder:hr/", "top_k_internal": 3}},
        {"config": {"configurable": {"model": "offline"}, "recursion_limit": 30, "tags": ["a"]}},
        {"checkpoint": {"checkpoint_id": "c1", "thread_id": "t1"}, "input": None},
        {"metadata": {"title": "Leave"}},
        "not an object",
        None,
    ):
        assert client_problem(body, "/threads/t1/runs/wait") is None, body


def test_ownership_metadata_is_refused_where_written_and_free_where_searched() -> None:
    for path in ("/threads", "/threads/t1", "/assistants", "/assistants/a1", "/threads/t1/runs"):
        for key in ("owner", "created_by"):
            problem = client_problem({"metadata": {key: "alice"}}, path)
            assert problem is not None and f"metadata.{key}" in problem
    for path in ("/threads/search", "/assistants/search", "/threads/t1/history"):
        assert client_problem({"metadata": {"owner": "alice"}}, path) is None


def _guarded(check_threads: bool = False) -> TestClient:
    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"got": await request.json()})

    app = Starlette(routes=[Route("/{path:path}", echo, methods=["POST", "PATCH", "PUT", "GET"])])
    return TestClient(RequestGuard(app, check_threads=check_threads))


def test_the_guard_answers_422_naming_the_key_and_replays_a_clean_body() -> None:
    client = _guarded()
    refused = client.post(
        "/threads/t1/runs/wait",
        json={
            "input": {"question": "q"},
            "config": {"configurable": {"langgraph_auth_user": None}},
        },
    )
    assert refused.status_code == 422
    assert "langgraph_auth_user" in refused.json()["detail"]
    assert refused.json()["error"] == refused.json()["detail"]
    patched = client.patch("/threads/t1", json={"metadata": {"owner": "alice"}})
    assert patched.status_code == 422 and "metadata.owner" in patched.text
    clean = {"input": {"question": "q"}, "context": {"scope": ""}}
    passed = client.post("/threads/t1/runs/stream", json=clean)
    assert passed.status_code == 200 and passed.json() == {"got": clean}
    # Not the graphs' API: not this guard's business.
    assert client.post("/kb/x", json={"context": {"kb_access": "all"}}).status_code == 200


def test_the_guard_bounds_the_body_it_reads() -> None:
    import server.request_guard as guard

    client = _guarded()
    big = {"input": {"question": "x" * (guard.MAX_BODY_BYTES + 10)}}
    refused = client.post("/runs/wait", json=big)
    assert refused.status_code == 413 and "MB" in refused.json()["error"]


async def test_a_served_graph_without_a_caller_reads_no_document(sample_home: Path) -> None:
    """The graphs a server serves carry no caller: a run the server did not name (or
    named ``None``, the finding's request) cites nothing, where the in-process graph,
    the local operator's, cites the handbook."""
    from graph.rag_graph import graph as local_graph
    from server.graphs import agent_graph, rag_graph

    context = Context(data_home=str(sample_home), search_provider="none")
    local = await local_graph.ainvoke({"question": KB_QUESTION}, context=context)
    assert "18 days" in local["answer"]
    assert local["citations"][0]["doc_id"] == "hr/annual-leave.md"
    for served in (rag_graph, agent_graph):
        for config in ({}, {"configurable": {"langgraph_auth_user": None}}):
            out = await served.ainvoke({"question": KB_QUESTION}, config, context=context)
            assert out["citations"] == [], out
            assert "18 days" not in out["answer"]


async def test_both_servers_serve_the_graphs_without_a_caller() -> None:
    """langgraph.json's factories and Aegra's return graphs with no caller bound; only the
    in-process graphs run as the local operator."""
    from graph.agent.agent_graph import graph as local_agent
    from graph.rag_graph import graph as local_rag
    from run.reader import AUTH_USER_KEY
    from server import aegra_app, graphs

    served = [graphs.rag_graph, graphs.agent_graph]
    served += [await aegra_app.hybrid_rag(), await aegra_app.tool_agent()]
    for compiled in served:
        assert AUTH_USER_KEY not in (compiled.config or {}).get("configurable", {})
    for compiled in (local_rag, local_agent):
        assert compiled.config["configurable"][AUTH_USER_KEY] == LOCAL_OPERATOR

"""Issue 55 items 4, 5 and 7 on a real server, langgraph dev and Aegra: an API key is its
user on the graphs' routes, /kb and MCP until revoked; a conversation shared with a named
colleague is read through its copy, a citation of a document they may not read withheld
until the document is shared with them too; the thread stays its owner's."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.team_server import TeamServer
from tests.test_ui_browser import production_team  # noqa: F401

FACT = "The quarterly bonus pool code is HERON-42."
DOC = "upload:plans/bonus.md"
ASK = "What is the quarterly bonus pool code?"
TIMEOUT = 180.0
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def headers(team: TeamServer) -> dict[str, dict[str, str]]:
    return {u: {"Authorization": f"Bearer {t}"} for u, t in team.tokens.items()}


def check_keys(team: TeamServer) -> None:
    url, auth = team.url, headers(team)
    made = httpx.post(f"{url}/auth/keys", json={"name": "mcp"}, headers=auth["bob"]).json()
    as_key = [{"x-api-key": made["key"]}, {"Authorization": f"Bearer {made['key']}"}]
    for h in as_key:
        assert httpx.post(f"{url}/threads", json={}, headers=h).status_code == 200
        assert httpx.get(f"{url}/kb/me", headers=h).json()["identity"] == "bob"
        tools = httpx.post(f"{url}/mcp", json=LIST_TOOLS, headers=h, timeout=60)
        assert tools.status_code == 200 and "hybrid_rag" in tools.text, tools.text
    gone = httpx.delete(f"{url}/auth/keys/{made['id']}", headers=auth["bob"])
    assert gone.status_code == 200
    for h in as_key:  # revoked: refused at once, everywhere
        assert httpx.post(f"{url}/threads", json={}, headers=h).status_code == 401
        assert httpx.get(f"{url}/kb/me", headers=h).status_code == 401
        assert httpx.post(f"{url}/mcp", json=LIST_TOOLS, headers=h, timeout=60).status_code == 401


def upload_private(team: TeamServer, auth: dict[str, str]) -> None:
    files = [("file", ("bonus.md", f"# Bonus pool\n\n{FACT}\n".encode()))]
    job = httpx.post(f"{team.url}/kb/uploads", headers=auth, data={"folder": "plans"}, files=files)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:  # bounded
        state = httpx.get(f"{team.url}/kb/jobs/{job.json()['job_id']}", headers=auth).json()
        if state["state"] in ("done", "failed"):
            assert state["state"] == "done", state
            return
        time.sleep(0.5)
    raise AssertionError("the upload did not finish")


def ask(team: TeamServer, auth: dict[str, str]) -> str:
    thread = httpx.post(f"{team.url}/threads", json={}, headers=auth).json()["thread_id"]
    run = httpx.post(f"{team.url}/threads/{thread}/runs/wait", headers=auth, timeout=TIMEOUT,
                     json={"assistant_id": "hybrid_rag", "input": {"question": ASK}})  # fmt: skip
    assert run.status_code == 200, run.text
    assert any(c.get("doc_id") == DOC for c in run.json().get("citations", [])), run.text
    return str(thread)


def bonus_citations(reply: httpx.Response) -> list[dict[str, Any]]:
    assert reply.status_code == 200, reply.text
    turns = reply.json()["turns"]
    assert turns and turns[-1]["question"] == ASK
    return [c for c in turns[-1]["citations"] if c.get("doc_id") == DOC or c.get("withheld")]


def check_shared_conversation(team: TeamServer) -> None:
    url, auth = team.url, headers(team)
    upload_private(team, auth["alice"])
    thread = ask(team, auth["alice"])
    share = f"{url}/kb/threads/{thread}/share"
    assert httpx.put(share, json={"with": ["user:bob"]}, headers=auth["bob"]).status_code == 404
    made = httpx.put(share, json={"with": ["user:bob"]}, headers=auth["alice"], timeout=60)
    assert made.status_code == 200 and made.json()["with"] == ["user:bob"], made.text
    listed = httpx.get(f"{url}/kb/shared", headers=auth["bob"]).json()["threads"]
    assert [(t["thread_id"], t["owner"]) for t in listed] == [(thread, "alice")]
    shown = bonus_citations(httpx.get(f"{url}/kb/shared/{thread}", headers=auth["bob"]))
    assert shown and all(
        c == {"label": c["label"], "type": "internal", "withheld": True} for c in shown
    )
    assert "bonus.md" not in json.dumps(shown)
    # The thread itself stays alice's; an admin not named reads nothing of it.
    assert httpx.get(f"{url}/threads/{thread}/state", headers=auth["bob"]).status_code == 404
    assert httpx.get(f"{url}/kb/shared/{thread}", headers=auth["root"]).status_code == 404
    # Shared the document too: the citation opens, at the next read.
    doc = f"{url}/kb/documents/{quote(DOC, safe='')}/access"
    granted = httpx.post(
        doc, json={"principal": "user:bob"}, headers=auth["alice"], timeout=TIMEOUT
    )
    assert granted.status_code == 200, granted.text
    shown = bonus_citations(httpx.get(f"{url}/kb/shared/{thread}", headers=auth["bob"]))
    assert shown and all(c.get("doc_id") == DOC and c.get("title") for c in shown)
    # The thread deleted through another client: its owner still stops sharing the copy.
    assert httpx.delete(f"{url}/threads/{thread}", headers=auth["alice"]).status_code in (200, 204)
    assert httpx.put(share, json={"with": []}, headers=auth["bob"], timeout=60).status_code == 404
    stopped = httpx.put(share, json={"with": []}, headers=auth["alice"], timeout=60)
    assert stopped.status_code == 200
    assert httpx.get(f"{url}/kb/shared/{thread}", headers=auth["bob"]).status_code == 404


@pytest.mark.slow  # a question on the team's langgraph dev
def test_keys_and_shared_conversations_on_langgraph_dev(team: TeamServer) -> None:
    check_keys(team)
    check_shared_conversation(team)


@pytest.mark.slow  # ~1 min: PostgreSQL, Aegra and the sample KB
def test_keys_and_shared_conversations_on_the_production_server(
    production_team: TeamServer,  # noqa: F811
) -> None:
    check_keys(production_team)
    check_shared_conversation(production_team)

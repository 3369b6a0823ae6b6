"""Collections (issue 45 item 6): a question scoped to a folder, a source or a named set of
documents through the run's ``scope`` context field, honoured by both graphs (the agent's
internal_search included), the collections API and MCP, and never widening what a user
may read. The SDK test runs both graphs on a real ``langgraph dev`` (the team's server)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from starlette.applications import Starlette
from starlette.testclient import TestClient

from graph import Context, build_agent_graph, build_graph
from server.mcp_tools import bad_arguments, input_schema
from server.webapp import routes
from tests.fakes import hash_model
from tests.team_server import TeamServer
from tests.test_ui_browser import production_team  # noqa: F401
from tools.access.acl import Reader, parse_acl
from tools.access.scope import make_scope, parse_scope
from tools.access.users import add_user
from tools.errors import ConfigError, FieldError, InputError
from tools.kb.documents.collections import (
    CollectionStore,
    DocumentSet,
    collection_store,
    parse_set,
    resolve_scope,
)
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

LEAVE = "How many days of annual leave after 6 years of service?"


def test_a_scope_names_a_folder_a_source_or_a_set() -> None:
    folder, source = make_scope("folder:/hr/"), make_scope("source:upload")
    assert folder is not None and source is not None
    assert folder.allows({"doc_id": "hr/leave.md"}) and folder.allows({"doc_id": "upload:hr/x.pdf"})
    assert not folder.allows({"doc_id": "finance/hr/x.md"})
    assert source.allows({"doc_id": "upload:a.pdf"}) and not source.allows({"doc_id": "a.md"})
    synced = make_scope("source:wiki")
    assert synced is not None and synced.allows({"doc_id": "src:wiki:https://w/x"})
    chosen = make_scope("set:board", ["a.md"])
    assert (
        chosen is not None
        and chosen.allows({"doc_id": "a.md"})
        and not chosen.allows({"doc_id": "b.md"})
    )
    assert parse_scope("") is None
    for bad in ("hr/", "team:x", "folder:", "set:" + "x" * 400):
        with pytest.raises(InputError, match="is not valid"):
            parse_scope(bad)
    with pytest.raises(ConfigError, match="scope"):
        Context(scope="nope")


def test_a_scope_narrows_and_never_widens(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "hr").mkdir(parents=True)
    (docs / "hr" / "pay.md").write_text("# Pay\n\nThe salary code is ZEBRA-17.\n")
    (docs / "hr" / "leave.md").write_text("# Leave\n\nLeave lasts 18 days, code ZEBRA-18.\n")
    (docs / "budget.md").write_text("# Budget\n\nThe budget code is ZEBRA-19.\n")
    kb = KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model())
    kb.ingest([docs])
    kb.ingest([docs / "hr" / "pay.md"], acl=parse_acl("group:hr"))
    bob = Reader.of("bob")
    in_hr = make_scope("folder:hr/")
    for mode in ("hybrid", "bm25", "vector"):
        seen = {
            h.doc_id
            for h in kb.search("ZEBRA code", 10, mode=mode, reader=Reader.everyone().scoped(in_hr))
        }  # type: ignore[arg-type]
        assert seen == {"hr/pay.md", "hr/leave.md"}
        bobs = {h.doc_id for h in kb.search("ZEBRA code", 10, mode=mode, reader=bob.scoped(in_hr))}  # type: ignore[arg-type]
        assert bobs == {"hr/leave.md"}  # the scope does not open hr/pay.md to bob
    assert kb.probe("budget code", reader=bob.scoped(in_hr)) < kb.probe("budget code", reader=bob)
    kb.close()


def test_an_unknown_set_is_named_and_a_set_is_read_when_searched(tmp_path: Path) -> None:
    unknown = resolve_scope("set:x", tmp_path)  # nothing read yet (the server's event loop)
    assert unknown is not None and not (tmp_path / "collections.sqlite").exists()
    with pytest.raises(InputError, match="no document set named 'x'"):
        unknown.allows({"doc_id": "a.md"})
    collection_store(tmp_path).put(DocumentSet("x", "alice", "", ("a.md",)))
    found = resolve_scope("set:x", tmp_path)
    assert found is not None and found.allows({"doc_id": "a.md"})
    assert not found.allows({"doc_id": "b.md"}) and found.key() == "set:x|a.md"


def cited(out: dict[str, Any]) -> set[str]:
    return {c["doc_id"] for c in out.get("citations") or [] if c.get("doc_id")}


@pytest.mark.parametrize("builder", [build_graph, build_agent_graph])
def test_both_graphs_answer_from_the_scope_only(
    builder: Any, sample_kb: KnowledgeBase, tmp_path: Path
) -> None:
    def ask(**kw: Any) -> dict[str, Any]:
        ctx = Context(data_home=str(sample_kb.home), search_provider="none", **kw)
        return asyncio.run(builder().ainvoke({"question": LEAVE}, context=ctx))

    assert "hr/annual-leave.md" in cited(ask(scope="folder:hr/"))
    elsewhere = ask(scope="folder:finance/")
    assert not any(d.startswith("hr/") for d in cited(elsewhere))
    assert "18 days" not in elsewhere["answer"]
    collection_store(sample_kb.home).put(DocumentSet("leave", "alice", "", ("hr/annual-leave.md",)))
    assert cited(ask(scope="set:leave")) == {"hr/annual-leave.md"}


def test_the_collections_api_lists_defines_and_guards_sets(
    sample_kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = tmp_path / "users.json"
    tokens = {"alice": add_user(users, "alice", ["hr"]), "bob": add_user(users, "bob"),
              "root": add_user(users, "root", admin=True)}  # fmt: skip
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(users))
    client = TestClient(Starlette(routes=routes()))
    alice, bob, root = ({"Authorization": f"Bearer {tokens[u]}"} for u in ("alice", "bob", "root"))
    body = client.get("/kb/collections", headers=alice).json()
    assert {"hr/", "finance/"} <= set(body["folders"]) and body["sources"] == ["cli"]
    made = client.post("/kb/collections", headers=alice,
                       json={"name": "leave", "doc_ids": ["hr/annual-leave.md"]})  # fmt: skip
    assert made.status_code == 201 and made.json()["scope"] == "set:leave"
    missing = client.post(
        "/kb/collections", headers=alice, json={"name": "x", "doc_ids": ["nope.md"]}
    )
    assert missing.status_code == 404
    bad = client.post(
        "/kb/collections", headers=alice, json={"name": "a b", "doc_ids": ["hr/annual-leave.md"]}
    )
    assert bad.status_code == 422 and "set name" in bad.json()["error"]
    assert client.delete("/kb/collections/leave", headers=bob).status_code == 403
    assert client.post("/kb/collections", headers=bob,
                       json={"name": "leave", "doc_ids": ["hr/annual-leave.md"]}).status_code == 403  # fmt: skip
    sets = client.get("/kb/collections", headers=bob).json()["sets"]
    assert sets[0]["name"] == "leave" and sets[0]["can_change"] is False
    assert client.delete("/kb/collections/leave", headers=root).json() == {"deleted": "leave"}


def test_mcp_takes_a_scope() -> None:
    assert "scope" in input_schema()["properties"]
    assert bad_arguments({"question": "q", "scope": "folder:hr/"}) is None
    assert "is not valid" in str(bad_arguments({"question": "q", "scope": "hr"}))
    assert "must be a string" in str(bad_arguments({"question": "q", "scope": 3}))


def sdk_scoped_answers(team: TeamServer) -> list[tuple[str, str, set[str]]]:
    """Alice's leave question on both graphs, scoped to hr/ and to finance/, and through an
    assistant of her own bound to finance/: (graph, scope, cited doc_ids)."""

    async def go() -> list[tuple[str, str, set[str]]]:
        client = get_client(url=team.url, api_key=None,
                            headers={"Authorization": f"Bearer {team.tokens['alice']}"})  # fmt: skip
        seen = []

        async def ask(assistant: str, context: dict[str, Any] | None) -> set[str]:
            thread = await client.threads.create()
            out = await client.runs.wait(thread["thread_id"], assistant, input={"question": LEAVE},
                                         context=context)  # fmt: skip
            assert isinstance(out, dict), out
            return cited(out)

        for graph in ("hybrid_rag", "tool_agent"):
            for scope in ("folder:hr/", "folder:finance/"):
                seen.append(
                    (graph, scope, await ask(graph, {"scope": scope, "search_provider": "none"}))
                )
            bound = await client.assistants.create(
                graph, context={"scope": "folder:finance/", "search_provider": "none"}
            )
            seen.append(
                (f"{graph} assistant", "folder:finance/", await ask(bound["assistant_id"], None))
            )
        return seen

    return asyncio.run(go())


def check_scoped(seen: list[tuple[str, str, set[str]]]) -> None:
    for graph, scope, docs in seen:
        folder = scope.split(":", 1)[1]
        assert all(d.startswith(folder) for d in docs), (graph, scope, docs)
        if folder == "hr/":
            assert "hr/annual-leave.md" in docs, (graph, docs)


@pytest.mark.slow  # both graphs on the team's langgraph dev
def test_the_sdk_scopes_both_graphs(team: TeamServer) -> None:
    check_scoped(sdk_scoped_answers(team))


@pytest.mark.slow  # ~1 min: PostgreSQL, Aegra and the sample KB
def test_the_sdk_scopes_both_graphs_on_the_production_server(
    production_team: TeamServer,  # noqa: F811
) -> None:
    check_scoped(sdk_scoped_answers(production_team))
    # The page's other routes are the production server's too.
    auth = {u: {"Authorization": f"Bearer {production_team.tokens[u]}"} for u in ("alice", "root")}
    url = production_team.url
    thread = httpx.post(f"{url}/threads", json={}, headers=auth["alice"]).json()["thread_id"]
    vote = {"thread_id": thread, "answer": "a", "vote": "down", "question": LEAVE}
    assert httpx.put(f"{url}/feedback", json=vote, headers=auth["alice"]).status_code == 200
    # A vote is taken only on a thread the voter may read (the server asked as the caller).
    assert httpx.put(f"{url}/feedback", json=vote | {"thread_id": "t"},
                     headers=auth["alice"]).status_code == 404  # fmt: skip
    assert httpx.get(f"{url}/admin/users", headers=auth["alice"]).status_code == 403
    assert httpx.get(f"{url}/admin/users", headers=auth["root"]).status_code == 200
    assert "hr/" in httpx.get(f"{url}/kb/collections", headers=auth["alice"]).json()["folders"]


@pytest.fixture
def three(
    sample_kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[TestClient, dict[str, dict[str, str]]]:
    """The collections API over the sample KB plus an hr-only document, for alice (hr),
    bob and root (admin)."""
    secret = tmp_path / "layoffs.md"
    secret.write_text("# Layoffs\n\nThe Q3 list.\n")
    sample_kb.ingest([secret], acl=parse_acl("group:hr"))
    users = tmp_path / "users.json"
    tokens = {"alice": add_user(users, "alice", ["hr"]), "bob": add_user(users, "bob"),
              "root": add_user(users, "root", admin=True)}  # fmt: skip
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(users))
    auth = {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
    return TestClient(Starlette(routes=routes())), auth


def test_a_set_is_shown_only_to_who_may_read_all_its_documents(
    three: tuple[TestClient, dict[str, dict[str, str]]],
) -> None:
    """Issue 53 item 16: bob saw "HR layoffs Q3 secret list", not its members."""
    client, auth = three
    body = {"name": "q3", "description": "HR layoffs Q3 secret list",
            "doc_ids": ["layoffs.md", "hr/annual-leave.md"]}  # fmt: skip
    assert client.post("/kb/collections", json=body, headers=auth["alice"]).status_code == 201
    for who, shown in (("alice", True), ("root", True), ("bob", False)):
        sets = client.get("/kb/collections", headers=auth[who]).json()["sets"]
        assert any(s["name"] == "q3" for s in sets) is shown, who
    text = client.get("/kb/collections", headers=auth["bob"]).text
    assert "layoffs" not in text.lower()
    again = client.post("/kb/collections", json=body | {"doc_ids": ["hr/annual-leave.md"]},
                        headers=auth["bob"])  # fmt: skip
    assert again.status_code == 409 and "alice" not in again.json()["error"]
    assert client.delete("/kb/collections/q3", headers=auth["bob"]).status_code == 404


def test_one_name_created_at_once_is_one_201_and_one_409(
    three: tuple[TestClient, dict[str, dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 53 item 16: two parallel creations of one name were both 201 (1 in 15): here
    both requests read "no such set" before either wrote, the race made certain."""
    client, auth = three
    original = CollectionStore.get
    monkeypatch.setattr(CollectionStore, "get", lambda self, name: None)
    body = {"name": "board", "doc_ids": ["hr/annual-leave.md"]}
    first = client.post("/kb/collections", json=body, headers=auth["alice"])
    second = client.post("/kb/collections", json=body, headers=auth["bob"])
    assert (first.status_code, second.status_code) == (201, 409)
    assert "a set named 'board' exists" in second.json()["error"]
    monkeypatch.setattr(CollectionStore, "get", original)
    sets = client.get("/kb/collections", headers=auth["bob"]).json()["sets"]
    assert [s["owner"] for s in sets if s["name"] == "board"] == ["alice"]


@pytest.mark.parametrize("name", [".", "..", "", "...", ".hidden", "a..b", "-rf", "_x", "a\n"])
def test_path_like_or_empty_set_names_are_refused_naming_the_rule(name: str) -> None:
    with pytest.raises(FieldError, match=r"starting with a letter or digit, no '\.\.'"):
        parse_set("alice", {"name": name, "doc_ids": ["a.md"]})
    assert parse_set("alice", {"name": "q3.v-2_x", "doc_ids": ["a.md"]}).name == "q3.v-2_x"


def test_the_api_answers_a_bad_set_name_422(
    three: tuple[TestClient, dict[str, dict[str, str]]],
) -> None:
    client, auth = three
    for name in ("..", "."):
        bad = client.post("/kb/collections", json={"name": name, "doc_ids": ["hr/annual-leave.md"]},
                          headers=auth["alice"])  # fmt: skip
        assert bad.status_code == 422 and "starting with a letter or digit" in bad.json()["error"]

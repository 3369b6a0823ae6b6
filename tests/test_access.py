"""Per-user document access: ACL parsing, folder rules, the user directory, and both
retrievers filtered by the reader, against real embedded Chroma."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cli.main import main
from tests.fakes import hash_model
from tools.access.acl import FolderRules, Reader, acl_metadata, parse_acl
from tools.access.users import UserDirectory, add_user, hash_token, read_users
from tools.errors import ConfigError, InputError
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

ALICE = Reader.of("alice", ["hr"])
BOB = Reader.of("bob", ["finance"])
SECRET_HR = "The salary band review code for HR is ZEBRA-17, kept in the HR drawer."
SECRET_FIN = "The quarterly budget unlock code for finance is QUOKKA-42, ask the controller."


def test_parse_acl_sorts_and_names_bad_items() -> None:
    assert parse_acl("user:alice, group:hr,group:hr") == ("group:hr", "user:alice")
    assert parse_acl("public") == ()
    with pytest.raises(InputError, match="'hr' is not an access principal"):
        parse_acl("hr")
    with pytest.raises(InputError, match="kind must be one of"):
        parse_acl("team:hr")
    with pytest.raises(InputError, match="empty access list"):
        parse_acl(" , ")
    with pytest.raises(InputError, match="cannot be combined"):
        parse_acl("public,group:hr")
    with pytest.raises(InputError, match="not valid"):
        parse_acl("group:h r")


def test_reader_filters_metadata() -> None:
    hr_only = acl_metadata(("group:hr",))
    assert hr_only == {"acl": "group:hr"}
    assert ALICE.may_read(hr_only) and not BOB.may_read(hr_only)
    assert BOB.may_read({}) and BOB.may_read(acl_metadata(()))  # public
    assert Reader.everyone().may_read(hr_only)
    assert ALICE.key() != BOB.key() != Reader.everyone().key()


def test_folder_rules_nearest_file_wins_and_reach_above_the_named_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "hr" / "pay").mkdir(parents=True)
    (tmp_path / "hr" / ".acl").write_text("# HR only\ngroup:hr\nuser:carol\n")
    (tmp_path / "hr" / "pay" / "open").mkdir()
    (tmp_path / "hr" / "pay" / "open" / ".acl").write_text("public")
    rules = FolderRules(default=("group:all",))
    assert rules.acl_for(tmp_path / "hr" / "pay" / "x.md") == ("group:hr", "user:carol")
    assert rules.acl_for(tmp_path / "hr" / "pay" / "open" / "y.md") == ()
    assert rules.acl_for(tmp_path / "z.md") == ("group:all",)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ".acl").write_text("hr")
    with pytest.raises(InputError, match=r"bad/\.acl: 'hr' is not an access principal"):
        rules.acl_for(tmp_path / "bad" / "w.md")


def test_user_directory_hashes_tokens_and_rereads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    token = add_user(path, "alice", ["hr"])
    assert token not in path.read_text()  # only the hash is stored
    directory = UserDirectory(path)
    user = directory.authenticate(token)
    assert user is not None and user.identity == "alice" and user.groups == ("hr",)
    assert directory.authenticate("wrong") is None and directory.authenticate("") is None
    bob_token = add_user(path, "bob", ["finance"])
    bob = directory.authenticate(bob_token)  # added while "running": no restart
    assert bob is not None and bob.reader() == BOB
    new = add_user(path, "alice", ["hr", "it"])  # a new token replaces the old one
    assert directory.authenticate(token) is None
    assert directory.authenticate(new) is not None


@pytest.mark.parametrize(
    ("users", "message"),
    [
        ({"people": []}, 'expected {"users"'),
        ({"users": [{"identity": "a", "token_sha256": "xyz"}]}, "64 hex digits"),
        ({"users": [{"identity": "a b", "token_sha256": "0" * 64}]}, "not valid"),
        ({"users": [{"identity": "a", "groups": "hr", "token_sha256": "0" * 64}]}, "list"),
        (
            {
                "users": [
                    {"identity": "a", "token_sha256": "0" * 64},
                    {"identity": "a", "token_sha256": "1" * 64},
                ]
            },
            "listed twice",
        ),
    ],
)
def test_a_broken_users_file_is_named(tmp_path: Path, users: object, message: str) -> None:
    path = tmp_path / "users.json"
    path.write_text(json.dumps(users))
    with pytest.raises(ConfigError, match=message):
        read_users(path)
    assert hash_token("t") != hash_token("u")


@pytest.fixture
def acl_kb(tmp_path: Path) -> KnowledgeBase:
    docs = tmp_path / "docs"
    (docs / "hr").mkdir(parents=True)
    (docs / "hr" / ".acl").write_text("group:hr")
    (docs / "hr" / "pay.md").write_text(f"# Pay review\n\n{SECRET_HR}\n")
    (docs / "budget.md").write_text(f"# Budget\n\n{SECRET_FIN}\n")
    (docs / "handbook.md").write_text("# Handbook\n\nThe office opens at nine. Codes are secret.\n")
    kb = KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model())
    kb.ingest([docs])  # handbook, hr/pay: by rule; budget: public for now
    kb.ingest([docs / "budget.md"], acl=parse_acl("group:finance"))
    return kb


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_each_retriever_returns_only_what_the_reader_may_read(
    acl_kb: KnowledgeBase, mode: str
) -> None:
    def seen(query: str, reader: Reader) -> set[str]:
        return {h.doc_id for h in acl_kb.search(query, 10, mode=mode, reader=reader)}  # type: ignore[arg-type]

    hr_query, fin_query = "salary band review code ZEBRA-17", "budget unlock code QUOKKA-42"
    assert "hr/pay.md" in seen(hr_query, ALICE) and "hr/pay.md" not in seen(hr_query, BOB)
    assert "budget.md" in seen(fin_query, BOB) and "budget.md" not in seen(fin_query, ALICE)
    everyone = {h.doc_id for h in acl_kb.search("code", 10, mode=mode)}  # type: ignore[arg-type]
    assert {"budget.md", "hr/pay.md"} <= everyone  # local use reads every document


def test_the_readers_own_document_is_found_and_cache_never_crosses_readers(
    acl_kb: KnowledgeBase,
) -> None:
    question = "What is the budget unlock code?"
    assert acl_kb.retrieve(question, 3, reader=BOB).hits[0].doc_id == "budget.md"
    # Same question, same generation: the cached search of Bob is not served to Alice.
    hits = acl_kb.retrieve(question, 3, reader=ALICE).hits
    assert all("QUOKKA" not in h.text for h in hits)
    assert acl_kb.probe(question, reader=ALICE) < acl_kb.probe(question, reader=BOB)
    outsider = Reader.of("mallory")
    assert {h.doc_id for h in acl_kb.search("code", 10, reader=outsider)} == {"handbook.md"}


def test_a_changed_acl_rewrites_the_chunks_without_new_content(
    acl_kb: KnowledgeBase, tmp_path: Path
) -> None:
    budget = tmp_path / "docs" / "budget.md"
    report = acl_kb.ingest([budget], acl=parse_acl("group:finance"))
    assert report.unchanged == ["budget.md"]  # same ACL: nothing to do
    report = acl_kb.ingest([budget], acl=parse_acl("group:finance,user:alice"))
    assert report.updated == ["budget.md"]
    assert any(h.doc_id == "budget.md" for h in acl_kb.search("QUOKKA-42", 5, reader=ALICE))
    assert acl_kb.stats()["restricted_documents"] == 2
    assert acl_kb.stats()["stale_chunks"] == 0
    acl_kb.ingest([budget], acl=parse_acl("public"))
    assert any(h.doc_id == "budget.md" for h in acl_kb.search("QUOKKA-42", 5, reader=BOB))
    assert any(h.doc_id == "budget.md" for h in acl_kb.search("QUOKKA-42", 5, reader=ALICE))


def test_cli_ingest_acl_and_search_as(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "budget.md").write_text(f"# Budget\n\n{SECRET_FIN}\n")
    home = str(tmp_path / "home")
    assert main(["--home", home, "ingest", str(docs), "--acl", "group:finance"]) == 0
    capsys.readouterr()
    assert main(["--home", home, "search", "QUOKKA-42", "--as", "user:alice,group:hr"]) == 0
    assert "QUOKKA" not in capsys.readouterr().out
    assert main(["--home", home, "search", "QUOKKA-42", "--as", "group:finance"]) == 0
    assert "QUOKKA-42" in capsys.readouterr().out
    assert main(["--home", home, "ingest", str(docs), "--acl", "finance"]) == 2
    assert "'finance' is not an access principal" in capsys.readouterr().err


def test_cli_users_add_prints_the_token_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "users.json"
    assert main(["users", "add", "alice", "--groups", "hr,it", "--file", str(path)]) == 0
    out = capsys.readouterr().out
    token = out.rsplit(": ", 1)[1].strip()
    user = UserDirectory(path).authenticate(token)
    assert user is not None and user.groups == ("hr", "it")
    assert main(["users", "add", "bad name", "--file", str(path)]) == 2
    assert "not valid" in capsys.readouterr().err


async def test_the_auth_handler_without_a_users_file_is_the_local_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from run.reader import reader_of, run_reader
    from server.auth import authenticate

    monkeypatch.delenv("HYBRID_RAG_USERS_FILE", raising=False)
    user = await authenticate({})
    assert user["identity"] == "local" and reader_of(user).unrestricted
    # No identity reads nothing (was: every document), outside a run too.
    assert run_reader() == Reader.nobody() and reader_of(None) == Reader.nobody()


async def test_the_auth_handler_maps_a_token_to_the_users_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph_sdk import Auth

    from run.reader import reader_of
    from server.auth import authenticate

    users = tmp_path / "users.json"
    token = add_user(users, "alice", ["hr"])
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(users))
    user = await authenticate({b"authorization": f"Bearer {token}".encode()})
    assert reader_of(user) == ALICE
    for header in ({}, {b"authorization": b"Bearer nope"}, {"authorization": f"Basic {token}"}):
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            await authenticate(header)
        assert refused.value.status_code == 401
    users.write_text("{not json")
    with pytest.raises(Auth.exceptions.HTTPException) as broken:
        await authenticate({"authorization": f"Bearer {token}"})
    assert broken.value.status_code == 503 and "users file" in str(broken.value.detail)


def test_a_wrapped_server_user_keeps_its_groups() -> None:
    from run.reader import reader_of

    class Wrapped:  # langgraph-api's ProxyUser: attributes, and items
        identity = "bob"

        def __getitem__(self, key: str) -> object:
            return {"groups": ["finance"], "kb_access": "acl"}[key]

    assert reader_of(Wrapped()) == BOB


@pytest.mark.parametrize("exact_limit", [1000, 0])
def test_chromas_own_query_skips_what_the_reader_may_not_read(
    acl_kb: KnowledgeBase, exact_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search is restricted, not only re-checked: the vector side's ``n`` candidates
    are ``n`` readable chunks, so a reader's search is never starved by others' ones;
    whether the reader's share is compared exactly (small) or found by a deeper query
    filtered on the reader's mask (``exact_limit`` 0), never by a list of chunk ids."""
    import tools.kb.search.dense as search_module

    monkeypatch.setattr(search_module, "EXACT_LIMIT", exact_limit)
    snap = acl_kb.snapshot()
    readable = acl_kb.pipeline.retrievers.readable(snap, ALICE)
    assert readable is not None
    allowed = [snap.ids[i] for i in np.flatnonzero(readable.mask)]
    assert {snap.metadatas[snap.position[c]]["doc_id"] for c in allowed} == {
        "hr/pay.md",
        "handbook.md",
    }
    pool = acl_kb.pipeline.candidate_pool("budget unlock code", mode="vector", reader=ALICE, n=2)
    assert len(pool.vector_found) == 2 and set(pool.vector_found) <= set(allowed)
    pool = acl_kb.pipeline.candidate_pool("budget unlock code", mode="bm25", reader=ALICE, n=50)
    assert set(pool.bm25_found) <= set(allowed)
    nobody = Reader.of("nobody-at-all")
    assert {h.doc_id for h in acl_kb.search("office", 5, mode="vector", reader=nobody)} == {
        "handbook.md"
    }


async def test_owner_stamping_and_store_namespaces() -> None:
    """The authorization handlers: creation stamps the owner in place (the server stores
    the metadata object it passed in), reads filter on it, store items are per user."""
    from types import SimpleNamespace

    from server.auth import assistants, owned, store

    def ctx(action: str) -> object:
        return SimpleNamespace(user=SimpleNamespace(identity="alice"), action=action)

    metadata: dict[str, object] = {"topic": "pay"}
    value = {"metadata": metadata}
    assert await owned(ctx("create"), value) == {"owner": "alice"}  # type: ignore[arg-type]
    assert metadata == {"topic": "pay", "owner": "alice"}
    assert await owned(ctx("read"), {}) == {"owner": "alice"}  # type: ignore[arg-type]
    shared = await assistants(ctx("search"), {})  # type: ignore[arg-type]
    assert shared == {"$or": [{"owner": "alice"}, {"created_by": "system"}]}
    assert await assistants(ctx("update"), {}) == {"owner": "alice"}  # type: ignore[arg-type]
    item = {"namespace": ("notes",)}
    await store(ctx("put"), item)  # type: ignore[arg-type]
    assert item["namespace"] == ("alice", "notes")


def test_a_model_never_sees_what_its_caller_may_not_read(
    sample_kb: KnowledgeBase, sample_kb_copy: Path, tmp_path: Path, scripted: Any
) -> None:
    """In process, with a (scripted) model: the caller the server would put in the run's
    config decides what reaches the model's prompts, the streams and the final state."""
    from graph import Context, build_graph
    from tests.fakes import grade_every

    private = tmp_path / "private"
    private.mkdir()
    (private / "pay.md").write_text(f"# Pay review\n\n{SECRET_HR}\n")
    (private / "budget.md").write_text(f"# Budget\n\n{SECRET_FIN}\n")
    sample_kb.ingest([private / "pay.md"], acl=parse_acl("group:hr"))
    sample_kb.ingest([private / "budget.md"], acl=parse_acl("user:bob"))
    scripted.structured = {
        "Plan": [
            {
                "route": "knowledge",
                "reason": "internal codes",
                "kb_queries": ["quarterly budget unlock code", "salary band review code"],
                "web_queries": [],
            }
        ],
        "PassageGrades": [grade_every("correct")],
        "Reflection": [{"sufficient": True, "next_query": "", "source": "internal"}],
    }
    scripted.answer = lambda m: "The code is in the sources [internal-1]."
    alice = {"identity": "alice", "groups": ["hr"], "kb_access": "acl"}
    context = Context(
        data_home=str(sample_kb.home), search_provider="none", model="custom:scripted"
    )

    async def go() -> list[str]:
        return [
            json.dumps(part, default=str, ensure_ascii=False)
            async for part in build_graph().astream(
                {"question": "What are the budget unlock code and the salary band code?"},
                {"configurable": {"langgraph_auth_user": alice}},
                context=context,
                stream_mode=["values", "updates", "messages", "custom", "debug"],
            )
        ]

    streamed = "\n".join(asyncio.run(go()))
    prompts = "\n".join(str(messages) for _, messages in scripted.calls)
    assert "ZEBRA-17" in prompts and "ZEBRA-17" in streamed  # her own document
    assert "QUOKKA" not in prompts and "QUOKKA" not in streamed
    assert "budget.md" not in streamed

"""Feedback on answers (issue 45 item 4): the store (per user), the API (a user sees and
changes only their own), the numbers of ``stats``, the export ``eval retrieval`` reads,
and the copy sent to LangSmith on the judged run (a fake client)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from cli.main import main
from server import feedback_api
from server.webapp import routes
from tests.fakes import hash_model
from tools.access.users import add_user
from tools.errors import InputError
from tools.evaluation.datasets import load_beir
from tools.feedback.export import corpus_of, export_feedback
from tools.feedback.langsmith_feedback import send_feedback
from tools.feedback.report import feedback_report
from tools.feedback.votes import FeedbackStore, feedback_path, parse_feedback, read_all
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

ANSWER = "Employees receive 15 days of annual leave after five years. [internal-1]"


def vote(thread: str = "t1", **over: Any) -> dict[str, Any]:
    body = {"thread_id": thread, "question": "How many days of leave?", "answer": ANSWER,
            "vote": "down", "comment": "wrong year", "doc_ids": ["leave.md"], "run_id": "r1"}  # fmt: skip
    return {**body, **over}


def test_a_vote_is_one_row_per_user_and_answer(tmp_path: Path) -> None:
    store = FeedbackStore(feedback_path(tmp_path))
    first = store.put(parse_feedback("alice", vote()))
    time.sleep(0.01)
    changed = store.put(parse_feedback("alice", vote(vote="up", comment="", run_id="")))
    assert changed.answer_key == first.answer_key and changed.vote == 1
    assert changed.run_id == "r1" and changed.created == first.created  # kept
    store.put(parse_feedback("bob", vote()))
    assert [f.vote for f in store.mine("alice")] == [1]
    assert len(store.mine("bob", "t1")) == 1 and store.mine("bob", "t2") == []
    assert not store.remove("bob", "nope") and store.remove("bob", first.answer_key)
    store.close()
    assert [f.user for f in read_all(tmp_path)] == ["alice"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "JSON object"),
        (vote(vote="meh"), "vote must be 'up' or 'down'"),
        (vote(answer="  "), "answer is missing"),
        (vote(thread_id=""), "thread_id is missing"),
        (vote(doc_ids="leave.md"), "doc_ids must be a list"),
        (vote(comment=3), "comment must be a string"),
    ],
)
def test_bad_feedback_is_named(body: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_feedback("alice", body)


def test_report_counts_rate_and_most_down_voted() -> None:
    items = [
        parse_feedback("alice", vote()),
        parse_feedback("bob", vote()),
        parse_feedback("bob", vote("t2", answer="other", doc_ids=["it.txt"], vote="up")),
    ]
    report = feedback_report(items, runs=10)
    assert (report["votes"], report["up"], report["down"]) == (3, 1, 2)
    assert report["feedback_rate"] == 0.3
    assert report["most_down_voted_documents"] == [{"doc_id": "leave.md", "down": 2}]
    assert report["most_down_voted_questions"][0] == {
        "question": "How many days of leave?",
        "down": 2,
    }


def test_the_export_is_a_beir_folder_eval_retrieval_reads(tmp_path: Path, kb_dir: Path) -> None:
    kb = KnowledgeBase(KBConfig(home=tmp_path / "h"), embedding_model=hash_model())
    kb.ingest([kb_dir])
    snap = kb.snapshot()
    items = [
        parse_feedback("alice", vote()),
        parse_feedback(
            "alice",
            vote("t2", question="IT outage number?", answer="4455", doc_ids=["it.txt"], vote="up"),
        ),
    ]
    out = tmp_path / "fb"
    down_id = f"fb-{items[0].answer_key[:16]}"
    out.mkdir()
    (out / "expected.tsv").write_text(f"query-id\tdoc-id\n{down_id}\texpenses.md\n")
    result = export_feedback(items, corpus_of(snap.texts, snap.metadatas), out)
    assert (result.queries, result.down, result.documents) == (2, 1, 5)
    qrels = (out / "qrels" / "feedback.tsv").read_text().splitlines()
    assert f"{down_id}\tleave.md\t0" in qrels  # should not have been cited
    assert f"{down_id}\texpenses.md\t1" in qrels  # the reviewer's expected document
    data = load_beir(out, "feedback")
    assert data.qrels[down_id] == {"expenses.md": 1} and len(data.qrels) == 2
    kb.close()


class FakeLangSmith:
    def __init__(self) -> None:
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.updated: list[tuple[Any, dict[str, Any]]] = []

    def create_feedback(self, run_id: str, **kw: Any) -> None:
        if any(kw["feedback_id"] == c[1]["feedback_id"] for c in self.created):
            raise RuntimeError("409 conflict")
        self.created.append((run_id, kw))

    def update_feedback(self, feedback_id: Any, **kw: Any) -> None:
        self.updated.append((feedback_id, kw))


def test_langsmith_gets_the_vote_on_its_run_and_its_change() -> None:
    fake = FakeLangSmith()
    item = parse_feedback("alice", vote())
    assert send_feedback(fake, item)
    run_id, kw = fake.created[0]
    assert run_id == "r1" and kw["key"] == "user_vote" and kw["score"] == 0.0
    assert kw["comment"] == "wrong year"
    assert send_feedback(fake, parse_feedback("alice", vote(vote="up")))
    assert fake.updated[0][1]["score"] == 1.0
    assert not send_feedback(fake, parse_feedback("alice", vote(run_id="")))


THREADS = {"t1": "alice", "t2": "alice", "tb": "bob"}  # thread -> owner
RUNS = {"r1": "t1", "rb": "tb"}  # run -> thread


def fake_server(tokens: dict[str, str]) -> Any:
    """``feedback_api.server_status`` of a server holding ``THREADS`` and ``RUNS``: a
    thread (and its runs) is 200 to its owner, 404 to anyone else."""
    users = {f"Bearer {t}": u for u, t in tokens.items()}

    async def status(scope: Any, path: str) -> int:
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        parts = path.strip("/").split("/")  # threads/<id>[/runs/<run>]
        if users.get(auth) is None:
            return 401
        if THREADS.get(parts[1]) != users[auth]:
            return 404
        return 200 if len(parts) == 2 or RUNS.get(parts[3]) == parts[1] else 404

    return status


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, dict[str, str]]:
    users = tmp_path / "users.json"
    tokens = {"alice": add_user(users, "alice", ["hr"]), "bob": add_user(users, "bob")}
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(users))
    monkeypatch.setenv("HYBRID_RAG_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(feedback_api, "server_status", fake_server(tokens))
    return TestClient(Starlette(routes=routes())), tokens


def test_each_user_sees_and_changes_only_their_own(
    api: tuple[TestClient, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, tokens = api
    fake = FakeLangSmith()
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setattr(feedback_api, "langsmith_client", lambda: fake)
    alice, bob = ({"Authorization": f"Bearer {tokens[u]}"} for u in ("alice", "bob"))
    assert client.put("/feedback", json=vote()).status_code == 401
    saved = client.put("/feedback", json=vote(), headers=alice)
    assert saved.status_code == 200 and saved.json()["vote"] == "down"
    assert client.put("/feedback", json=vote(vote="x"), headers=alice).status_code == 400
    assert client.get("/feedback", headers=bob).json() == {"feedback": []}
    key = saved.json()["answer_key"]
    assert client.delete(f"/feedback/{key}", headers=bob).status_code == 404
    mine = client.get("/feedback?thread_id=t1", headers=alice).json()["feedback"]
    assert [f["comment"] for f in mine] == ["wrong year"]
    deadline = time.monotonic() + 5
    while not fake.created and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.created[0][0] == "r1"
    assert client.delete(f"/feedback/{key}", headers=alice).json() == {"deleted": key}


def test_stats_and_export_feedback_commands(
    tmp_path: Path, kb_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    assert main(["--home", str(home), "ingest", str(kb_dir)]) == 0
    store = FeedbackStore(feedback_path(home))
    store.put(parse_feedback("alice", vote()))
    store.close()
    (home / "runs.jsonl").write_text(json.dumps({"route": "knowledge"}) + "\n")
    capsys.readouterr()
    assert main(["--home", str(home), "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["feedback"]
    assert stats["down"] == 1 and stats["feedback_rate"] == 1.0
    assert main(["--home", str(home), "stats"]) == 0
    assert "down-voted document    1  leave.md" in capsys.readouterr().out
    out = tmp_path / "export"
    assert main(["--home", str(home), "eval", "export-feedback", "--out", str(out)]) == 0
    assert "1 question(s) (1 down-voted)" in capsys.readouterr().out
    assert (out / "queries.jsonl").read_text().count('"vote": "down"') == 1


def test_a_vote_is_taken_only_on_a_thread_and_run_the_voter_may_read(
    api: tuple[TestClient, dict[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 53 item 12: bob (404 on alice's thread) down-voted her answer; the export's row
    for it carried his vote and LangSmith got it on alice's run."""
    client, tokens = api
    fake = FakeLangSmith()
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setattr(feedback_api, "langsmith_client", lambda: fake)
    alice, bob = ({"Authorization": f"Bearer {tokens[u]}"} for u in ("alice", "bob"))
    assert client.put("/feedback", json=vote(vote="up"), headers=alice).status_code == 200
    forged = client.put("/feedback", json=vote(), headers=bob)
    assert forged.status_code == 404 and "thread not found" in forged.json()["error"]
    on_her_run = client.put("/feedback", json=vote("tb"), headers=bob)  # r1 is alice's run
    assert on_her_run.status_code == 404 and "run not found" in on_her_run.json()["error"]
    assert client.put("/feedback", json=vote("tb", run_id="rb"), headers=bob).status_code == 200
    deadline = time.monotonic() + 5
    while len(fake.created) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted((run, kw["source_info"]["user"]) for run, kw in fake.created) == [
        ("r1", "alice"), ("rb", "bob")
    ]  # fmt: skip
    items = feedback_api.store().everything()
    out = tmp_path / "export"
    export_feedback(items, {}, out)
    qid = f"fb-{items[0].answer_key[:16]}"
    assert f"{qid}\tleave.md\t1" in (out / "qrels" / "feedback.tsv").read_text().splitlines()


def test_json_bodies_and_their_fields_are_bounded(
    api: tuple[TestClient, dict[str, str]],
) -> None:
    """Issue 53 item 11: a 150 MB doc_ids entry was stored (and answered by GET)."""
    client, tokens = api
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    huge = client.put("/feedback", json=vote(doc_ids=["x" * 2_000_000]), headers=alice)
    assert huge.status_code == 413 and "1024 KB limit" in huge.json()["error"]
    long_id = client.put("/feedback", json=vote(doc_ids=["x" * 300]), headers=alice)
    assert long_id.status_code == 422 and "doc_ids[0]" in long_id.json()["error"]
    many = client.put("/feedback", json=vote(doc_ids=[f"d{i}" for i in range(60)]), headers=alice)
    assert many.status_code == 422 and "doc_ids has 60 entries" in many.json()["error"]
    comment = client.put("/feedback", json=vote(comment="c" * 3000), headers=alice)
    assert comment.status_code == 422 and "comment" in comment.json()["error"]
    surrogate = client.put(
        "/feedback", content=b'{"thread_id": "t1", "answer": "\\ud800"}', headers=alice
    )
    assert (
        surrogate.status_code == 422 and "answer is not valid Unicode" in surrogate.json()["error"]
    )
    not_json = client.put("/feedback", content=b"\xff{", headers=alice)
    assert not_json.status_code == 400 and set(not_json.json()) == {"error"}
    sets = client.post("/kb/collections", json={"name": "x", "doc_ids": ["y" * 200_000]},
                       headers=alice)  # fmt: skip
    assert sets.status_code == 422 and "doc_ids[0]" in sets.json()["error"]
    assert client.get("/feedback", headers=alice).json() == {"feedback": []}


def test_the_export_refuses_control_characters_and_escapes_formulas(tmp_path: Path) -> None:
    """Issue 53 item 12: a doc_ids entry with a tab and a newline added qrels rows, one
    starting ``=cmd|calc!A1``."""
    with pytest.raises(InputError, match=r"doc_ids\[0\] .* control character"):
        parse_feedback("bob", vote(doc_ids=["x\t1\n=cmd|calc!A1\t"]))
    stored = parse_feedback("bob", vote(doc_ids=["=sum.md", "+a.md", "ok.md"]))
    old_row = replace(stored, doc_ids=("x\t1\n=cmd|calc!A1\tx", *stored.doc_ids))
    result = export_feedback([old_row], {}, tmp_path / "out")
    lines = (tmp_path / "out" / "qrels" / "feedback.tsv").read_text().splitlines()
    qid = f"fb-{stored.answer_key[:16]}"
    assert lines[1:] == [f"{qid}\t'+a.md\t0", f"{qid}\t'=sum.md\t0", f"{qid}\tok.md\t0"]
    assert result.refused == 1 and all(len(line.split("\t")) == 3 for line in lines)

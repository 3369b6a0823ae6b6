"""Feedback on answers (issue 45 item 4): the store (per user), the API (a user sees and
changes only their own), the numbers of ``stats``, the export ``eval retrieval`` reads,
and the copy sent to LangSmith on the judged run (a fake client)."""

from __future__ import annotations

import json
import time
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


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, dict[str, str]]:
    users = tmp_path / "users.json"
    tokens = {"alice": add_user(users, "alice", ["hr"]), "bob": add_user(users, "bob")}
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(users))
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

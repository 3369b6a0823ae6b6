"""Issue 53 item 18: what the custom routes answer when something fails is always
``{"error": ...}`` in plain words, never a path of the server's file system (the detail is
logged), whether a library error quotes the data home or a parser fails on the body."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from server import documents_api
from server.webapp import app
from tools.errors import StoreError, kb_unavailable, without_paths
from tools.kb.knowledge_base import KnowledgeBase


def test_an_error_quoting_the_data_home_is_answered_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    chroma = tmp_path / "home" / "chroma"

    def broken() -> None:
        raise StoreError(f"cannot open embedded Chroma at {chroma}: database is locked")

    monkeypatch.setattr(documents_api, "services", broken)
    with caplog.at_level(logging.WARNING, logger="hybrid_rag.server"):
        answer = TestClient(app).get("/kb/documents")
    assert answer.status_code == 503 and list(answer.json()) == ["error"]
    assert str(tmp_path) not in answer.text and "database is locked" in answer.json()["error"]
    assert str(chroma) in caplog.text  # the operator still has it


def test_paths_go_and_urls_and_scopes_stay() -> None:
    text = "at /srv/data/home/chroma: see https://h.example/a/b for folder:/hr/ and /kb/x"
    assert without_paths(text) == (
        "at <server path>: see https://h.example/a/b for folder:/hr/ and <server path>"
    )


def test_a_lone_surrogate_and_a_broken_multipart_body_are_plain_errors(
    sample_kb: KnowledgeBase,
) -> None:
    client = TestClient(app)
    surrogate = client.post("/kb/collections", content=b'{"name": "\\ud800", "doc_ids": ["a.md"]}')
    assert surrogate.status_code == 422
    assert surrogate.json() == {"error": "name is not valid Unicode text (a lone surrogate)"}
    broken = client.post(
        "/kb/uploads",
        content=b"--x\r\nNoColonHeader\r\n\r\nhello",
        headers={"content-type": "multipart/form-data; boundary=x"},
    )
    assert broken.status_code == 400 and list(broken.json()) == ["error"]
    assert "multipart/form-data body is malformed" in broken.json()["error"]


def test_a_runs_warning_about_the_store_names_no_path(tmp_path: Path) -> None:
    """A served run's answer carries this warning to its API user."""
    exc = StoreError(f"no knowledge base (collection) 'kb' in embedded Chroma at {tmp_path}/c")
    warning = kb_unavailable(exc)
    assert str(tmp_path) not in warning
    assert warning == (
        "knowledge base unavailable: no knowledge base (collection) 'kb' in embedded Chroma"
        " at <server path>"
    )

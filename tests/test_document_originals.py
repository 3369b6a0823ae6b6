"""A CLI-ingested document's original (issue 53, item 9): served only while the file on
the server, read without following a symbolic link, still holds the indexed bytes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from run import resources
from server.documents_api import routes
from tests.fakes import hash_model
from tools.access.users import add_user
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

HANDBOOK = "# Handbook\n\nThe office opens at nine.\n"
SECRET = "root:x:0:0:root:/root:/bin/bash\n"


@pytest.fixture
def carol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Path]]:
    """An admin's client of the document API over a KB a CLI ingest made of kbsrc/."""
    src = tmp_path / "kbsrc"
    src.mkdir()
    (src / "handbook.md").write_text(HANDBOOK)
    kb = KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model())
    kb.ingest([src])
    resources.register_kb(kb)
    users = tmp_path / "users.json"
    token = add_user(users, "carol", [], admin=True)
    monkeypatch.setenv("HYBRID_RAG_USERS_FILE", str(users))
    client = TestClient(Starlette(routes=routes()))
    client.headers["Authorization"] = f"Bearer {token}"
    yield client, src
    resources.close_all()


def test_a_cli_documents_original_is_never_served_through_a_symbolic_link(
    carol: tuple[TestClient, Path], tmp_path: Path
) -> None:
    """kbsrc/handbook.md replaced by a symbolic link to a secret file (the finding: the
    system's passwd file): carol's GET .../original served the secret."""
    client, src = carol
    url = "/kb/documents/handbook.md/original"
    served = client.get(url)
    assert served.status_code == 200 and served.text == HANDBOOK  # the file as indexed
    secret = tmp_path / "passwd"
    secret.write_text(SECRET)
    (src / "handbook.md").unlink()
    os.symlink(secret, src / "handbook.md")
    refused = client.get(url)
    assert refused.status_code == 404 and SECRET not in refused.text
    assert "symbolic link" in refused.json()["error"]
    # A link with the indexed bytes behind it is refused too: never served through a link.
    secret.write_text(HANDBOOK)
    assert client.get(url).status_code == 404
    # The listing does not give the linked file's size either.
    listed = client.get("/kb/documents/handbook.md").json()
    assert listed["bytes"] != len(HANDBOOK)


def test_a_cli_documents_original_changed_in_place_is_not_served(
    carol: tuple[TestClient, Path],
) -> None:
    """The file rewritten with other bytes: not the indexed version, so not served."""
    client, src = carol
    (src / "handbook.md").write_text(SECRET)
    refused = client.get("/kb/documents/handbook.md/original")
    assert refused.status_code == 404 and SECRET not in refused.text
    assert "no longer holds the indexed version" in refused.json()["error"]
    (src / "handbook.md").write_text(HANDBOOK.replace("\n", "\r\n"))  # the same text
    assert client.get("/kb/documents/handbook.md/original").status_code == 200

"""What a user reads about the server's configuration (issues 45 and 56): a web search that
is not set up says "Web search is not set up — ask your administrator" to everyone who
asks, in their language, once, in the answer's note and never again under its notes; the
detail (environment variable names, pip install) goes to the log and `hybrid-rag doctor`,
never into an answer, even the operator's (an admin, or local use). And a
document's title at ingest: its metadata title or first heading, not its file name."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from graph import Context, build_graph
from tools.kb.ingest.titles import document_title
from tools.kb.knowledge_base import KnowledgeBase
from tools.policy.disclosure import (
    WEB_NOT_AVAILABLE,
    names_configuration,
    shown_warnings,
    web_reason_for,
)
from tools.websearch.web_settings import environment_variables

CONFIG_REASON = (
    "web search not configured: set one of SERPER_API_KEY, BRAVE_API_KEY "
    "(or use provider 'ddgs' after pip install 'hybrid-rag[ddgs]')"
)
BOB = {"identity": "bob", "groups": ["staff"], "kb_access": "acl"}
ADMIN = {"identity": "root", "groups": [], "kb_access": "acl", "is_admin": True}


def test_the_set_up_detail_is_for_nobody_and_a_setting_for_the_operator(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert names_configuration(CONFIG_REASON)
    assert names_configuration("web search is disabled (search_provider=none)")
    assert not names_configuration("web search failed: serper: HTTP 503")
    with caplog.at_level("INFO", logger="hybrid_rag.websearch"):
        assert web_reason_for(CONFIG_REASON, operator=True) == WEB_NOT_AVAILABLE
    assert "SERPER_API_KEY" in caplog.text and "hybrid-rag doctor" in caplog.text  # the log's
    assert web_reason_for(CONFIG_REASON, operator=False) == WEB_NOT_AVAILABLE
    disabled = "web search is disabled (search_provider=none)"
    assert web_reason_for(disabled, operator=True) == disabled  # a setting the run chose
    assert web_reason_for(disabled, operator=False) == WEB_NOT_AVAILABLE
    failed = "serper: HTTP 503"
    assert web_reason_for(failed, operator=False) == failed  # not the configuration


def test_notes_never_repeat_the_answers_note() -> None:
    warnings = [CONFIG_REASON, "2 sources left out to fit context_token_budget"]
    assert shown_warnings(warnings, CONFIG_REASON, operator=True) == warnings[1:]
    assert shown_warnings(warnings, CONFIG_REASON, operator=False) == warnings[1:]
    failed = ["web search failed: serper: HTTP 503"]
    assert shown_warnings(failed, "serper: HTTP 503", operator=False) == []
    # A configuration note the answer does not state: said plainly, once.
    other = ["brave needs BRAVE_API_KEY", "serper needs SERPER_API_KEY"]
    assert shown_warnings(other, None, operator=False) == [WEB_NOT_AVAILABLE]
    assert shown_warnings(other, None, operator=True) == [WEB_NOT_AVAILABLE]


def ask(home: Path, question: str, user: dict[str, Any] | None) -> dict[str, Any]:
    config = {"configurable": {"langgraph_auth_user": user}} if user else {}
    return asyncio.run(
        build_graph().ainvoke({"question": question}, config, context=Context(data_home=str(home)))
    )


@pytest.mark.parametrize(
    ("question", "plain"),
    [
        (
            "What is the latest Python release today?",
            "Web search is not set up — ask your administrator.",
        ),
        ("今天最新的 Python 版本是什么？", "网络搜索尚未设置——请联系管理员。"),
    ],
)
def test_a_user_reads_that_web_search_is_not_available(
    sample_kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    question: str, plain: str,
) -> None:  # fmt: skip
    for var in environment_variables():
        monkeypatch.delenv(var, raising=False)
    out = ask(tmp_path / "home", question, BOB)
    assert out["answer"].rstrip().endswith(plain), out["answer"]
    said = out["answer"] + "\n".join(out["warnings"])
    for detail in ("SERPER_API_KEY", "pip install", "not configured", "未配置"):
        assert detail not in said, said


@pytest.mark.parametrize(
    ("question", "plain"),
    [
        (
            "What is the latest Python release today?",
            "Web search is not set up — ask your administrator.",
        ),
        ("今天最新的 Python 版本是什么？", "网络搜索尚未设置——请联系管理员。"),
    ],
)
def test_the_operator_reads_the_same_and_doctor_has_the_detail(
    sample_kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], question: str, plain: str,
) -> None:  # fmt: skip
    """The Chinese answer listed seven *_API_KEY names to the local operator (issue 56)."""
    for var in environment_variables():
        monkeypatch.delenv(var, raising=False)
    for user in (None, ADMIN):  # local use, and an admin of the server
        out = ask(tmp_path / "home", question, user)
        assert out["answer"].rstrip().endswith(plain), out["answer"]
        said = out["answer"] + "\n".join(out["warnings"])
        for detail in ("_API_KEY", "pip install", "not configured", "未配置"):
            assert detail not in said, said
    from cli.main import main

    assert main(["--home", str(tmp_path / "home"), "doctor"]) == 0
    report = capsys.readouterr().out
    assert "SERPER_API_KEY" in report and "web search: not set up" in report, report
    assert f"data home: {(tmp_path / 'home').resolve()}" in report, report
    monkeypatch.setenv("HYBRID_RAG_HOME", str(tmp_path / "env-home"))
    assert main(["doctor"]) == 0  # no --home: the folder it resolves to, never "None"
    assert f"data home: {(tmp_path / 'env-home').resolve()}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "markdown", "title"),
    [
        ("# 会议室管理规定\n\n第一条 …", True, "会议室管理规定"),
        ("Intro line\n\n## **Annual** leave ##\n\nText", True, "Annual leave"),
        ("---\ntitle: 'Expense policy'\nowner: finance\n---\n# Other\n", True, "Expense policy"),
        ("---\nowner: finance\n---\n# Travel\n", True, "Travel"),
        ("# not a heading in a text file\n", False, ""),
        ("No heading at all.\n", True, ""),
        ("```\n# a comment in code\n```\n# Setup\n", True, "Setup"),
    ],
)
def test_a_documents_title(text: str, markdown: bool, title: str) -> None:
    assert document_title(text, markdown=markdown) == title


def test_the_sample_kb_lists_titles_not_file_names(sample_kb: KnowledgeBase) -> None:
    from tools.access.acl import Reader
    from tools.kb.documents.library import Library

    titles = {
        d["path"].rsplit("/", 1)[-1]: d["title"]
        for d in Library(sample_kb).documents(Reader.everyone())
    }
    assert titles["meeting-rooms-zh.docx"] == "会议室管理规定", titles
    assert titles["annual-leave.md"] != "annual-leave", titles
    assert titles["offices-and-support.txt"] == "offices-and-support"  # plain text: its name

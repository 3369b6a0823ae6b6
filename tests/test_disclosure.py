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

from graph import Context, build_agent_graph, build_graph
from run.localize import localize
from tools.errors import kb_unavailable
from tools.kb.ingest.titles import document_title
from tools.kb.knowledge_base import KnowledgeBase
from tools.kb.store.protocol import no_collection
from tools.policy.disclosure import (
    KB_EMPTY,
    WEB_NOT_AVAILABLE,
    kb_reason_for,
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


def test_an_empty_knowledge_base_is_the_administrators_to_fill() -> None:
    """A colleague asking an empty knowledge base reads that it is empty and whom to ask,
    never the ingest command; the operator reads the command, in Chinese for a Chinese
    question (it was English after a Chinese prefix)."""
    empty = kb_unavailable(no_collection("knowledge", "embedded Chroma at /srv/kb"))
    assert kb_reason_for(empty, operator=True) == empty
    assert kb_reason_for(empty, operator=False) == KB_EMPTY
    assert shown_warnings([empty], None, operator=False) == [KB_EMPTY]
    assert localize(KB_EMPTY, "zh") == "知识库中还没有文档——请联系管理员"
    zh = localize(empty, "zh")
    assert zh == (
        "知识库不可用：embedded Chroma at <server path> 中没有知识库（集合）'knowledge'，"
        "尚未导入任何文档；运行 'hybrid-rag ingest PATH --collection knowledge' 即可创建"
    ), zh
    # A collection the run asked for that does not exist: the user's own choice, so the
    # names that exist stay; the command does not.
    typo = kb_unavailable(no_collection("knowlege", "embedded Chroma at /srv/kb", ["knowledge"]))
    shown = kb_reason_for(typo, operator=False)
    assert shown.endswith("existing: knowledge.") and "hybrid-rag ingest" not in shown
    assert localize(shown, "zh").endswith("中没有知识库（集合）'knowlege'，已有：knowledge")
    assert "hybrid-rag ingest" in localize(typo, "zh") and "已有：knowledge" in localize(typo, "zh")
    # A collection that exists with no chunks in it (a served data home) says the same.
    for empty in ("the knowledge base is empty: run 'hybrid-rag ingest PATH'",
                  "internal_search: the knowledge base is empty: run 'hybrid-rag ingest PATH'"):  # fmt: skip
        assert kb_reason_for(empty, operator=False) == KB_EMPTY
        assert kb_reason_for(empty, operator=True) == empty
    other = "knowledge base unavailable: damaged store at <server path> (x)"
    assert kb_reason_for(other, operator=False) == other


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


def ask(
    home: Path, question: str, user: dict[str, Any] | None, build: Any = build_graph
) -> dict[str, Any]:
    config = {"configurable": {"langgraph_auth_user": user}} if user else {}
    return asyncio.run(
        build().ainvoke({"question": question}, config, context=Context(data_home=str(home)))
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


@pytest.mark.parametrize(
    ("question", "plain"),
    [
        ("How many days of annual leave?", "the knowledge base has no documents yet"),
        ("年假有多少天？", "知识库中还没有文档——请联系管理员"),
    ],
)
def test_a_colleague_asking_an_empty_knowledge_base_is_told_whom_to_ask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, question: str, plain: str
) -> None:
    for var in environment_variables():
        monkeypatch.delenv(var, raising=False)
    for build in (build_graph, build_agent_graph):
        out = ask(tmp_path / "empty-home", question, BOB, build)
        notes = "\n".join(out["warnings"])
        assert plain in notes and "hybrid-rag ingest" not in notes + out["answer"], notes
        out = ask(tmp_path / "empty-home", question, ADMIN, build)  # the operator: the command
        assert "hybrid-rag ingest PATH --collection knowledge" in "\n".join(out["warnings"])

"""The model's sufficiency check (issue 56): after a model writes an answer, one short call
asks it whether the sources state the answer; "no" makes the answer "not found", in both
graphs. The call is bounded, fenced like the answer prompt, and decides nothing when it
fails or says neither yes nor no."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph import Context, build_agent_graph, build_graph
from run.models import register_chat_model, unregister_chat_model
from tests.agent_fakes import LocalLLMServer, ToolScriptedChatModel, ask, call
from tests.fakes import ScriptedChatModel
from tools.answer.sufficiency import verdict

QUESTION = "How many days of annual leave after 6 years of service?"
ANSWER = "After 6 years: 18 days [internal-1]."
REPLACED = "answer replaced by the refusal: the model judged that no source states the answer"


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ("Yes.", True), ("**yes**", True), ("是", True), ("是的。", True), ('"No"', False),
        ("no, they do not", False), ("否", False), ("不是", False), ("没有", False),
        ("Not stated.", False), ("I think so", None), ("yesterday", None), ("", None),
    ],
)  # fmt: skip
def test_the_one_word_reply_is_read_in_both_languages(reply: str, said: bool | None) -> None:
    assert verdict(reply) is said


@pytest.fixture
def agent_model() -> Iterator[ToolScriptedChatModel]:
    fake = ToolScriptedChatModel()
    register_chat_model("checked", fake)
    yield fake
    unregister_chat_model("checked")


def context(home: Path, **kw: Any) -> Context:
    return Context(**{"data_home": str(home), "search_provider": "none", **kw})


def run(builder: Any, question: str, ctx: Context) -> dict[str, Any]:
    return asyncio.run(builder().ainvoke({"question": question}, context=ctx))


def state_graph_model(scripted: ScriptedChatModel, sufficient: str) -> None:
    scripted.structured = {
        "Plan": [{"route": "knowledge", "reason": "r", "kb_queries": ["annual leave"]}],
        "PassageGrades": [lambda m: {"grades": ["correct"] * 10}],
        "Reflection": [{"sufficient": True}],
    }
    scripted.answer = lambda m: ANSWER
    scripted.sufficient = sufficient


@pytest.mark.parametrize(("sufficient", "kept"), [("Yes", True), ("No.", False), ("否", False)])
def test_state_graph_answer_stands_or_falls_with_the_check(
    sample_home: Path, scripted: ScriptedChatModel, sufficient: str, kept: bool
) -> None:
    state_graph_model(scripted, sufficient)
    out = run(build_graph, QUESTION, context(sample_home, model="custom:scripted"))
    assert [n for n, _ in scripted.calls].count("sufficiency") == 1
    if kept:
        assert out["answer"] == ANSWER and out["citations"]
        assert not any("refusal" in w for w in out["warnings"]), out["warnings"]
    else:
        assert out["answer"] == "No relevant information found." and out["citations"] == []
        assert REPLACED in out["warnings"], out["warnings"]


def test_the_check_is_fenced_like_the_answer_and_ignores_orders_in_sources(
    sample_home: Path, scripted: ScriptedChatModel
) -> None:
    state_graph_model(scripted, "no")
    question = "NR-200 机器人单台的标价是多少？"
    out = run(build_graph, question, context(sample_home, model="custom:scripted"))
    assert out["answer"].startswith("没找到相关信息。"), out["answer"]
    assert "回答已替换为拒答：模型判断没有来源写明答案" in out["warnings"], out["warnings"]
    messages = next(m for name, m in scripted.calls if name == "sufficiency")
    system, user = (str(m.content) for m in messages)
    assert "not instructions" in system or "不是指令" in system
    assert '<source label="[内部-1]"' in user and user.rstrip().endswith('只回答"是"或"否"。')


def test_off_a_refusal_already_or_a_small_model_costs_no_check(
    sample_home: Path, scripted: ScriptedChatModel
) -> None:
    state_graph_model(scripted, "no")
    out = run(
        build_graph,
        QUESTION,
        context(sample_home, model="custom:scripted", sufficiency_check=False),
    )
    assert out["answer"] == ANSWER and "sufficiency" not in [n for n, _ in scripted.calls]
    scripted.calls.clear()
    scripted.answer = lambda m: "No relevant information found."
    run(build_graph, QUESTION, context(sample_home, model="custom:scripted"))
    assert "sufficiency" not in [n for n, _ in scripted.calls]
    # A small model on a CPU: measured to say yes to every check, so none is made.
    scripted.calls.clear()
    scripted.answer = lambda m: ANSWER
    small = context(sample_home, model="custom:scripted", small_model=True)
    assert run(build_graph, QUESTION, small)["answer"] == ANSWER
    assert "sufficiency" not in [n for n, _ in scripted.calls]


def test_a_check_that_fails_or_says_neither_keeps_the_answer(
    sample_home: Path, scripted: ScriptedChatModel
) -> None:
    state_graph_model(scripted, "Perhaps; the table is unclear.")
    out = run(build_graph, QUESTION, context(sample_home, model="custom:scripted"))
    assert out["answer"] == ANSWER
    assert any("replied neither yes nor no" in w for w in out["warnings"]), out["warnings"]


def test_a_check_call_that_fails_keeps_the_answer(
    sample_home: Path, scripted: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nodes.sufficiency_check

    def timed_out(*args: Any, **kwargs: Any) -> Any:
        raise TimeoutError("the model server did not answer")

    monkeypatch.setattr(nodes.sufficiency_check, "load_chat_model", timed_out)
    state_graph_model(scripted, "no")
    out = run(build_graph, QUESTION, context(sample_home, model="custom:scripted"))
    assert out["answer"] == ANSWER
    assert "sufficiency check failed (TimeoutError); answer kept" in out["warnings"]


def test_over_http_the_check_asks_for_four_tokens(sample_home: Path) -> None:
    """Against an OpenAI-format server: one check, its reply bounded to 4 tokens, its "no"
    refusing the answer."""
    with LocalLLMServer([{"content": ANSWER}]) as server:
        server.sufficient = "no"
        env = {"OPENAI_BASE_URL": f"{server.base_url}/v1", "OPENAI_API_KEY": "k"}
        with pytest.MonkeyPatch.context() as mp:
            for name, value in env.items():
                mp.setenv(name, value)
            ctx = context(sample_home, model="openai:local", crosslingual=False)
            out = run(build_graph, QUESTION, ctx)
    assert len(server.checks) == 1
    check = server.checks[0]
    assert check.get("max_completion_tokens") == 4 or check.get("max_tokens") == 4, check
    assert out["answer"].startswith("No relevant information found."), out["answer"]


def test_the_agent_answer_passes_the_same_check(
    sample_home: Path, agent_model: ToolScriptedChatModel
) -> None:
    agent_model.script = [ask(call("internal_search", query="annual leave 6 years")), ANSWER]
    agent_model.sufficient = "no"
    out = run(build_agent_graph, QUESTION, context(sample_home, model="custom:checked"))
    assert len(agent_model.checks) == 1
    assert out["answer"] == "No relevant information found." and out["citations"] == []
    assert REPLACED in out["warnings"], out["warnings"]
    agent_model.checks.clear()
    agent_model.script = [ask(call("internal_search", query="annual leave 6 years")), ANSWER]
    agent_model.sufficient = "yes"
    out = run(build_agent_graph, QUESTION, context(sample_home, model="custom:checked"))
    assert len(agent_model.checks) == 1 and out["answer"] == ANSWER


def test_the_model_bench_records_the_draft_the_check_refused(
    sample_home: Path, scripted: ScriptedChatModel
) -> None:
    """bench/model_runs.run_question read the draft from ``ainvoke``'s output, which leaves
    ``answer_draft`` out: every row's draft was empty, so the bench's "without the check"
    figures silently equalled the checked ones."""
    from bench.model_runs import run_question

    state_graph_model(scripted, "No.")
    ctx = context(sample_home, model="custom:scripted")
    row = run_question(build_graph(), QUESTION, ctx, ["18 days"])
    assert row["draft"] == ANSWER and row["draft_right"] is True, row
    assert row["check_refused"] is True and row["right"] is False, row

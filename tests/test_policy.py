"""The decisions of both graphs (tools/policy/decisions.py): unit tests, then the same
evidence through the state graph's ``grade`` and the agent's decision path."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langgraph.runtime import Runtime

from graph import Context
from nodes.agent import answer_sources, decision_of
from nodes.generate import refuses, web_failure_reason
from nodes.grade import after_grade, grade
from nodes.retrieve import merge_sources
from tools.answer.agent_tools import GOOGLE_SEARCH, INTERNAL_SEARCH
from tools.policy.decisions import (
    KEEP_ON_FALLBACK,
    Evidence,
    decide,
    kb_confidence,
    kept_internal,
    needs_web_fallback,
    strategy_label,
)

Q = "How many days of annual leave after five years?"


def test_kb_confidence_is_the_best_search_or_the_mean_grade() -> None:
    assert kb_confidence(Evidence(kb_answerability=(0.2, 0.7, 0.4))) == 0.7
    graded = Evidence(kb_answerability=(0.9,), grades=("correct", "ambiguous", "incorrect"))
    assert kb_confidence(graded) == 0.5
    assert kb_confidence(Evidence()) == 0.0


@pytest.mark.parametrize(
    ("route", "answerability", "searched", "expected"),
    [
        ("knowledge", 0.1, False, True),  # weak KB, web not searched: fall back
        ("knowledge", 0.1, True, False),  # already searched: never twice
        ("knowledge", 0.9, False, False),  # strong KB
        ("both", 0.1, False, True),
        ("search", 0.0, False, False),  # the KB was not asked
    ],
)
def test_needs_web_fallback(
    route: Any, answerability: float, searched: bool, expected: bool
) -> None:
    evidence = Evidence(route=route, kb_answerability=(answerability,), web_searched=searched)
    assert needs_web_fallback(evidence, 0.3) is expected


def test_decide_confidence_by_route_and_refusal() -> None:
    kb, web = (0.2,), (1.0, 0.5)
    assert decide(Evidence("search", kb, web, web_searched=True), 0.3)["confidence"] == 0.75
    assert decide(Evidence("both", kb, web, web_searched=True), 0.3)["confidence"] == 0.75
    now = decide(Evidence("knowledge", kb, web), 0.3)
    assert now["confidence"] == 0.2 and now["search_web_now"] and now["web_fallback"]
    assert now["refuse"]
    after = decide(Evidence("knowledge", kb, web, web_searched=True, fell_back=True), 0.3)
    assert after["confidence"] == 0.75 and not after["search_web_now"] and after["web_fallback"]
    assert not after["refuse"]


def test_kept_internal_and_labels() -> None:
    docs = [1, 2, 3, 4]
    assert kept_internal(docs, True) == docs[:KEEP_ON_FALLBACK]
    assert kept_internal(docs, False) == docs
    assert strategy_label("knowledge", True) == "search_fallback"
    assert strategy_label("knowledge", False) == "vector"
    assert strategy_label("both", False) == "both"
    assert strategy_label("search", False, agent=True) == "agent"


def test_merge_sources_keeps_the_best_answerability_of_a_chunk() -> None:
    """Bug: the more relevant copy of a chunk won whole, dropping the higher answerability
    another search gave it (grade then saw a weaker KB than the searches found)."""
    first = {"id": "c1", "kind": "internal", "relevance": 0.9, "answerability": 0.2}
    second = {"id": "c1", "kind": "internal", "relevance": 0.5, "answerability": 0.8}
    merged = merge_sources([first], [second])  # type: ignore[list-item]
    assert len(merged) == 1
    assert merged[0]["relevance"] == 0.9 and merged[0]["answerability"] == 0.8


def test_no_node_branches_on_the_strategy_label() -> None:
    """``strategy`` is a label: a state saying 'search_fallback' without the decision does
    not send the run to the web nor report the web as wanted."""
    state = {"strategy": "search_fallback", "route": "knowledge", "web_error": "down"}
    assert after_grade(state) == "reflect"
    assert web_failure_reason(state) is None
    assert after_grade({**state, "decision": {"search_web_now": True}}) == "search_web"
    assert web_failure_reason({**state, "decision": {"web_fallback": True}}) == "down"


# --- the same evidence through both graphs ---------------------------------------------


def _internal(n: int, answerability: float) -> list[dict[str, Any]]:
    return [
        {"id": f"c{i}", "kind": "internal", "text": f"passage {i}", "relevance": 1 - i / 10,
         "answerability": answerability, "label": f"[internal-{i}]", "number": i}
        for i in range(1, n + 1)
    ]  # fmt: skip


def _web(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"https://w{i}", "kind": "web", "title": "annual leave days",
         "text": "five years of service", "label": f"[web-{i}]", "number": i}
        for i in range(1, n + 1)
    ]  # fmt: skip


CASES = [
    # route, KB answerability, web results, web searched, fallback taken before
    ("knowledge", 0.9, 0, False, False),
    ("knowledge", 0.05, 0, False, False),
    ("knowledge", 0.05, 2, True, True),
    ("both", 0.05, 3, True, False),
    ("both", 0.7, 1, True, False),
    ("search", 0.0, 2, True, False),
]


@pytest.mark.parametrize(("route", "answerability", "n_web", "searched", "fell_back"), CASES)
def test_both_graphs_decide_the_same_on_the_same_evidence(
    tmp_path: Path, route: str, answerability: float, n_web: int, searched: bool, fell_back: bool
) -> None:
    context = Context(data_home=str(tmp_path), confidence_threshold=0.3)
    internal = _internal(4, answerability) if route != "search" else []
    web = _web(n_web)
    previous = {"web_fallback": True} if fell_back else {}
    common = {"question": Q, "web_searched": searched, "decision": previous}
    # The state graph: the grade node, offline.
    rag_state = {**common, "route": route, "internal_docs": internal, "web_docs": web,
                 "fast_mode": "offline", "iteration": 0}  # fmt: skip
    graded = asyncio.run(grade(rag_state, Runtime(context=context)))  # type: ignore[arg-type]
    # The agent: its tools' records and registry, the route its calls took.
    calls = {"knowledge": [INTERNAL_SEARCH], "search": [GOOGLE_SEARCH],
             "both": [INTERNAL_SEARCH, GOOGLE_SEARCH]}[route]  # fmt: skip
    agent_state = {**common, "sources": [*internal, *web], "internal_docs": internal,
                   "web_docs": web, "tool_calls": [{"name": c} for c in calls]}  # fmt: skip
    verdict = decision_of(agent_state, context)
    for key in ("confidence", "kb_confidence", "web_confidence", "refuse"):
        assert graded["decision"][key] == verdict[key], key
    assert graded["confidence"] == verdict["confidence"]
    assert refuses({"decision": graded["decision"]}) == refuses({"decision": verdict})
    # What is kept for the answer on a fallback: the same KB passages in both graphs.
    if fell_back:
        kept_agent = [s["id"] for s in answer_sources(agent_state, context) if s["kind"] != "web"]
        assert kept_agent == [d["id"] for d in kept_internal(internal, True)]


def test_run_statistics_count_the_fallback_decision_not_the_label() -> None:
    from tools.evaluation.run_stats import report

    runs = [
        {"route": "knowledge", "strategy": "vector", "web_fallback": True},
        {"route": "knowledge", "strategy": "search_fallback", "web_fallback": False},
        {"route": "knowledge", "strategy": "search_fallback"},  # an older record: its label
        {"route": "knowledge", "strategy": "vector"},
    ]
    assert report(runs)["fallback_rate"] == 0.5

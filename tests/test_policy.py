"""The decisions of both graphs (tools/policy/decisions.py): unit tests, then the same
evidence through the state graph's ``grade`` and the agent's decision path."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.runtime import Runtime

from graph import Context
from graph.agent.model_loop import decision_of, evidence_of
from graph.agent.tool_work import GOOGLE_SEARCH, INTERNAL_SEARCH
from nodes.generate import refuses
from nodes.grade import after_grade, grade
from nodes.retrieve import merge_sources
from run.run_settings import resolve_run_settings
from run.run_view import run_of
from tests.agent_fakes import LocalLLMServer, serper_rows
from tools.policy.decisions import (
    KEEP_ON_FALLBACK,
    Decision,
    Evidence,
    EvidenceRecord,
    decide,
    kb_confidence,
    kept_internal,
    needs_web_fallback,
    record,
    strategy_label,
    web_unavailable,
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
    assert kept_internal(docs, {"search_web_now": True}) == docs[:KEEP_ON_FALLBACK]
    assert kept_internal(docs, {"search_web_now": False, "web_fallback": True}) == docs
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
    assert web_unavailable(state) is None
    assert after_grade({**state, "decision": {"search_web_now": True}}) == "search_web"
    assert web_unavailable({**state, "decision": {"web_fallback": True}}) == "down"


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
    verdict = decision_of(run_of(agent_state, Runtime(context=context)))
    assert graded["evidence"] == record(evidence_of(agent_state))  # the same evidence
    for key in ("confidence", "kb_confidence", "web_confidence", "refuse"):
        assert graded["decision"][key] == verdict[key], key
    assert graded["confidence"] == verdict["confidence"]
    assert refuses({"decision": graded["decision"]}) == refuses({"decision": verdict})


# --- one set of searches through both graphs' real paths ---------------------------------

KW = "annual leave days"  # a keyword selection of Q2: its hits carry Q2's own value
Q2 = "How many days of annual leave after 6 years of service?"


@pytest.fixture
def web_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalLLMServer]:
    from tools.websearch import SearchCache, set_default_cache

    with LocalLLMServer(search_results=serper_rows) as server:
        monkeypatch.setenv("SERPER_API_KEY", "test-key")
        monkeypatch.setenv("SERPER_BASE_URL", server.base_url)
        set_default_cache(SearchCache())
        yield server
        set_default_cache(None)


def _fresh() -> dict[str, Any]:
    from langgraph.types import Overwrite

    from run.reducers import fresh_turn

    return {k: v.value if isinstance(v, Overwrite) else v for k, v in fresh_turn().items()}


def _state_graph_turn(context: Context, route: str, kb: list[str]) -> dict[str, Any]:
    """The state graph's nodes over the given searches: retrieve ∥ search_web → grade (→
    the fallback search → grade)."""
    from nodes.retrieve import retrieve_internal, search_web

    runtime = Runtime(context=context)
    state: dict[str, Any] = {**_fresh(), "question": Q2, "route": route, "kb_queries": kb,
                             "web_queries": [Q2], "fast_mode": "offline", "iteration": 0,
                             "run_settings": resolve_run_settings(context)}  # as prepare  # fmt: skip
    steps = [retrieve_internal, search_web] if route == "both" else [retrieve_internal]
    for node in [*steps, grade]:
        state.update(asyncio.run(node(state, runtime)))  # type: ignore[arg-type]
    if after_grade(state) == "search_web":
        for node in (search_web, grade):
            state.update(asyncio.run(node(state, runtime)))  # type: ignore[arg-type]
    return state


def _agent_turn(context: Context, calls: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The agent's nodes: the model's ``calls`` through ``run_tools`` and its answer's
    decision, or (no calls) the offline rule's ``offline_tools`` and ``offline_answer``."""
    from langchain_core.messages import AIMessage

    from graph.agent.model_loop import _confidence, run_tools
    from graph.agent.offline_loop import offline_answer, offline_tools

    runtime = Runtime(context=context)
    state: dict[str, Any] = {**_fresh(), "question": Q2, "language": "en",
                             "run_settings": resolve_run_settings(context)}  # as prepare  # fmt: skip
    if calls is None:
        state["mode"] = "offline"
        for node in (offline_tools, offline_answer):
            state.update(asyncio.run(node(state, runtime)))  # type: ignore[arg-type]
        return state
    state.update(mode="custom:any", messages=[AIMessage("", tool_calls=calls)])
    state.update(asyncio.run(run_tools(state, runtime)))  # type: ignore[arg-type]
    return {**state, **_confidence(run_of(state, runtime))}


@pytest.mark.parametrize("case", ["both", "fallback"])
@pytest.mark.usefixtures("local_operator")
def test_one_set_of_searches_gives_both_graphs_the_same_evidence_and_decision(
    sample_home: Path, web_server: LocalLLMServer, case: str
) -> None:
    """Issue 32: the same searches (KB and web) through each graph's own nodes give the
    same evidence, the same decision and the same kept passages, field by field; the
    agent's internal_search applies the keyword rule as retrieve_internal does."""
    from tests.agent_fakes import call

    if case == "both":  # a model's searches: the question, a keyword selection, the web
        context = Context(data_home=str(sample_home), search_provider="serper")
        rag = _state_graph_turn(context, "both", [Q2, KW])
        agent = _agent_turn(context, [call("internal_search", query=Q2),
                                      call("internal_search", query=KW),
                                      call("google_search", query=Q2)])  # fmt: skip
    else:  # weak KB evidence (a threshold above it): the web fallback, in both graphs
        context = Context(data_home=str(sample_home), search_provider="serper",
                          confidence_threshold=0.95)  # fmt: skip
        rag = _state_graph_turn(context, "knowledge", [Q2])
        agent = _agent_turn(context, None)
        assert agent["route"] == "knowledge" and rag["decision"]["web_fallback"]
    for field in EvidenceRecord.__annotations__:
        assert rag["evidence"][field] == agent["evidence"][field], field
    for field in Decision.__annotations__:
        assert rag["decision"][field] == agent["decision"][field], field
    kept_rag, kept_agent = ([d["id"] for d in t["internal_docs"]] for t in (rag, agent))
    if case == "fallback":  # the two best KB passages, trimmed when the fallback was decided
        assert kept_rag == kept_agent and len(kept_rag) == KEEP_ON_FALLBACK
    else:  # the agent asks top_k per search, the state graph twice as many
        assert set(kept_agent) <= set(kept_rag)
    assert [d["id"] for d in rag["web_docs"]] == [d["id"] for d in agent["web_docs"]]
    for field in ("web_searched", "web_skipped", "web_error", "search_calls"):
        assert rag[field] == agent[field], field
    if case == "both":  # the keyword selection's hits carry no more than the question's
        assert max(agent["evidence"]["kb_answerability"]) == rag["decision"]["kb_confidence"]
        assert len(rag["evidence"]["kb_answerability"]) == 1


def test_run_statistics_count_the_fallback_decision_not_the_label() -> None:
    from tools.evaluation.run_stats import report

    runs = [
        {"route": "knowledge", "strategy": "vector", "web_fallback": True},
        {"route": "knowledge", "strategy": "search_fallback", "web_fallback": False},
        {"route": "knowledge", "strategy": "search_fallback"},  # an older record: its label
        {"route": "knowledge", "strategy": "vector"},
    ]
    assert report(runs)["fallback_rate"] == 0.5


# --- route / grade / reflect decisions, node by node (no whole-graph run) -----------------


@pytest.mark.parametrize(
    ("question", "probe", "route"),
    [
        ("What is the latest Python release today?", 0.0, "search"),  # time cue, KB silent
        ("What is our policy on annual leave?", 0.0, "knowledge"),  # internal cue
        ("How many days of leave after 5 years?", 0.99, "knowledge"),  # the KB knows it
        ("What is the latest news on our leave policy?", 0.0, "both"),  # time and internal
        ("Who painted the Mona Lisa?", 0.0, "both"),  # no cue, no KB match: ask both
    ],
)
def test_route_decision(question: str, probe: float, route: str) -> None:
    from tools.policy.offline import offline_route

    assert offline_route(question, probe).route == route


def test_grade_node_falls_back_once_and_keeps_the_best_two(tmp_path: Path) -> None:
    context = Context(data_home=str(tmp_path), confidence_threshold=0.3)
    state = {"question": Q, "route": "knowledge", "internal_docs": _internal(4, 0.05),
             "web_docs": [], "fast_mode": "offline", "iteration": 0}  # fmt: skip
    first = asyncio.run(grade(state, Runtime(context=context)))  # type: ignore[arg-type]
    assert [d["id"] for d in first["internal_docs"]] == ["c1", "c2"]
    assert first["strategy"] == "search_fallback" and first["next_source"] == ""
    assert after_grade({**state, **first}) == "search_web"
    # Back from the web: no second fallback, both sources count.
    back = {**state, **first, "web_docs": _web(2), "web_searched": True}
    second = asyncio.run(grade(back, Runtime(context=context)))  # type: ignore[arg-type]
    assert after_grade({**back, **second}) == "reflect"
    assert second["confidence"] == max(0.05, second["decision"]["web_confidence"])
    assert second["strategy"] == "search_fallback"


def test_grade_node_strong_kb_evidence_stays_internal(tmp_path: Path) -> None:
    context = Context(data_home=str(tmp_path), confidence_threshold=0.3)
    state = {"question": Q, "route": "knowledge", "internal_docs": _internal(4, 0.8),
             "web_docs": [], "fast_mode": "offline", "iteration": 0}  # fmt: skip
    out = asyncio.run(grade(state, Runtime(context=context)))  # type: ignore[arg-type]
    assert len(out["internal_docs"]) == 4 and out["strategy"] == "vector"
    assert out["confidence"] == 0.8 and not out["decision"]["refuse"]
    assert after_grade({**state, **out}) == "reflect"


def test_reflection_decisions() -> None:
    from tools.policy.decisions import (
        NextStep,
        offline_next_step,
        reflection_call_needed,
        worth_asking,
    )

    assert reflection_call_needed(0.2) and not reflection_call_needed(0.5)
    covered = offline_next_step("annual leave days", "knowledge", False, ["Annual leave: days"])
    assert covered.sufficient
    more = offline_next_step("annual leave carryover", "knowledge", False, ["annual leave"])
    assert more == NextStep(False, "carryover", "internal")
    web = offline_next_step("python release date", "search", False, ["python"])
    assert web.source == "web" and not web.sufficient
    assert offline_next_step("python release date", "search", True, ["python"]).sufficient
    assert worth_asking(more, tried=set()) and not worth_asking(more, tried={"carryover"})
    assert not worth_asking(NextStep(False, "  "), tried=set())


def test_coverage_rule_never_asks_for_a_chinese_modal_verb() -> None:
    """The demo's reflection asked the KB for "可以" alone: English drops "can" as a stop
    word, Chinese kept its counterpart."""
    from tools.policy.decisions import offline_next_step

    question = "太湖厅会议室可以容纳多少人？"
    table = "| 会议室 | 位置 | 容纳人数 |\n| --- | --- | --- |\n| 太湖厅 | B栋5楼 | 40人 |"
    assert offline_next_step(question, "knowledge", False, [table]).sufficient
    step = offline_next_step(question, "knowledge", False, ["会议室 容纳人数 40人"])
    assert not step.sufficient and "太湖" in step.next_query and "可以" not in step.next_query


def test_reflect_node_offline_asks_for_uncovered_terms(tmp_path: Path) -> None:
    from nodes.reflect import after_reflect, reflect

    context = Context(data_home=str(tmp_path))
    state = {"question": "annual leave carryover rules", "route": "knowledge",
             "internal_docs": [{"id": "c1", "text": "annual leave"}], "web_docs": [],
             "fast_mode": "offline", "iteration": 0, "reasoning": []}  # fmt: skip
    out = asyncio.run(reflect(state, Runtime(context=context)))  # type: ignore[arg-type]
    assert out["next_source"] == "internal" and "carryover" in out["next_query"]
    assert out["iteration"] == 1 and after_reflect({**state, **out}) == "retrieve_internal"
    bounded = {**state, "iteration": context.max_iterations}
    done = asyncio.run(reflect(bounded, Runtime(context=context)))  # type: ignore[arg-type]
    assert done["next_query"] == "" and after_reflect({**bounded, **done}) == "generate"


# --- configuration: no side effects, no import circle ------------------------------------


def test_context_validation_loads_nothing_and_sets_no_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug: Context(reranker="cross-encoder:...") loaded the model and set HF_HUB_OFFLINE
    for the whole process while validating; now the check only looks for the package."""
    import importlib.util
    import os

    from tools.kb.search import rerankers as rerank

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "sentence_transformers" else real(name, *a),
    )
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    loaded: list[str] = []
    monkeypatch.setattr(rerank, "_cross_encoder", lambda model: loaded.append(model))
    Context(reranker="cross-encoder:/nonexistent/model")
    assert loaded == [] and "HF_HUB_OFFLINE" not in os.environ


def test_the_environment_is_read_once_per_run(
    sample_kb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: every web search re-read the environment (WebSearchSettings.from_env per
    search); ``prepare`` now resolves it once and the searches of the run share it."""
    from graph import build_agent_graph, build_graph
    from tools.websearch import WebSearchSettings

    calls: list[str] = []
    original = WebSearchSettings.from_env.__func__  # type: ignore[attr-defined]

    def counted(cls: type[WebSearchSettings], env: Any = None, **kw: Any) -> WebSearchSettings:
        calls.append("read")
        return original(cls, env, **kw)

    monkeypatch.setattr(WebSearchSettings, "from_env", classmethod(counted))
    context = Context(data_home=str(tmp_path / "home"), max_iterations=2, search_provider="serper")
    question = {"question": "What is the latest news on our annual leave policy today?"}
    out = asyncio.run(build_graph().ainvoke(question, context=context))
    assert out["route"] in ("both", "search") and calls == ["read"]
    calls.clear()
    asyncio.run(build_agent_graph().ainvoke(question, context=context))
    assert calls == ["read"]


def test_run_settings_stay_off_the_context_and_out_of_every_output(
    sample_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's settings travel in the state's untracked channel: not on the context, not
    in the output, not in a checkpoint, and opaque to whatever serialises a node's input."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import build_graph
    from run.run_settings import RunSettings, resolve_run_settings

    monkeypatch.setenv("SERPER_API_KEY", "SENTINEL-run-settings-key")
    context = Context(data_home=str(sample_home), search_provider="serper")
    resolved = resolve_run_settings(context)
    assert resolved.web is not None and resolved.web.chain() == ("serper",)
    assert "SENTINEL" not in repr(resolved) and not hasattr(resolved, "__dict__")
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "t-settings"}}
    out = asyncio.run(
        build_graph(checkpointer=saver).ainvoke({"question": Q}, config, context=context)
    )
    assert "run_settings" not in out
    assert "SENTINEL-run-settings-key" not in repr(vars(context))
    assert "SENTINEL-run-settings-key" not in repr(list(saver.list(config)))
    assert isinstance(resolved, RunSettings)


def test_nothing_below_prepare_reads_the_environment(
    sample_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 item 3: a turn of either graph, with every read of ``os.environ`` by the
    project's code outside ``prepare`` raising (libraries read theirs freely)."""
    import os
    import sys
    from collections.abc import MutableMapping

    from graph import build_agent_graph, build_graph
    from nodes.prepare import prepare

    ours = ("graph.", "nodes.", "tools.", "prompts.")
    real = os.environ
    seen: list[str] = []

    class Guarded(MutableMapping[str, str]):
        def _check(self) -> None:
            frame = sys._getframe(2)
            reader = ""  # the first frame that is not the mapping machinery: who reads
            while frame is not None:
                name = str(frame.f_globals.get("__name__", ""))
                if frame.f_code is prepare.__code__:
                    return  # prepare reads the environment, once per run
                if not reader and name not in ("os", "_collections_abc", __name__):
                    reader = name
                frame = frame.f_back  # type: ignore[assignment]
            if reader.startswith(ours):
                seen.append(reader)
                raise AssertionError(f"{reader} read os.environ below prepare")

        def __getitem__(self, key: str) -> str:
            self._check()
            return real[key]

        def __setitem__(self, key: str, value: str) -> None:
            real[key] = value

        def __delitem__(self, key: str) -> None:
            del real[key]

        def __iter__(self) -> Any:
            self._check()
            return iter(real)

        def __len__(self) -> int:
            return len(real)

    with LocalLLMServer(search_results=serper_rows) as server:
        monkeypatch.setenv("SERPER_API_KEY", "test-key")
        monkeypatch.setenv("SERPER_BASE_URL", server.base_url)
        monkeypatch.setenv("HYBRID_RAG_PAGES_ALLOW_HOSTS", "127.0.0.1")
        context = Context(data_home=str(sample_home), search_provider="serper", read_pages=1)
        question = {"question": "What is the latest news on our annual leave policy today?"}
        monkeypatch.setattr(os, "environ", Guarded())
        out = asyncio.run(build_graph().ainvoke(question, context=context))
        agent = asyncio.run(build_agent_graph().ainvoke(question, context=context))
    assert seen == []
    assert out["route"] in ("both", "search") and out["search_calls"] >= 1
    assert out["pages_read"] + out["pages_failed"] >= 1  # the page reader ran, with its settings
    assert any(c["name"] == "google_search" and c["ok"] for c in agent["tool_calls"])


def test_one_locale_rule_for_every_web_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: hl/gl were chosen three ways; the agent's tool defaulted to zh-CN/cn for any
    query. Now what the model leaves out is the context's setting, else the query's
    language, as in the state graph and the offline agent."""
    from langgraph.prebuilt import ToolRuntime

    from graph.agent.tools import AGENT_TOOLS
    from tools.websearch.snippets import search_locale

    seen: list[tuple[str, str]] = []

    async def capture(service: Any, registry: Any, query: str, hl: Any, gl: Any, **_: Any) -> Any:
        seen.append(search_locale(query, hl, gl))
        return "ok", {"ok": True}

    monkeypatch.setattr("graph.agent.tools.work.google_search", capture)

    def call(context: Context, **args: Any) -> None:
        state = {"language": "en", "run_settings": resolve_run_settings(context)}
        runtime = ToolRuntime(state=state, context=context, config={},
                              stream_writer=lambda _: None, tool_call_id="1", store=None)  # fmt: skip
        asyncio.run(AGENT_TOOLS["google_search"].ainvoke(
            {"name": "google_search", "id": "1", "type": "tool_call",
             "args": {**args, "runtime": runtime}}))  # fmt: skip

    call(Context(data_home=str(tmp_path)), query="latest python release")
    call(Context(data_home=str(tmp_path)), query="今天上海的天气")
    call(Context(data_home=str(tmp_path), hl="de"), query="latest python release")
    call(Context(data_home=str(tmp_path)), query="news", hl="fr", gl="fr")
    assert seen == [("en", "us"), ("zh-CN", "cn"), ("de", "us"), ("fr", "fr")]


def test_models_are_built_from_the_runs_settings_not_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 26 item 3: ``prepare`` reads the model environment once (run.run_settings);
    nodes build and resolve models from it, so a later change of the environment does not
    reach a run, and no node module reads ``os.environ`` itself."""
    from run.models import AUTO_MODEL, OFFLINE, load_chat_model, resolve_model_spec
    from run.run_settings import ModelEnv

    env = ModelEnv(base_url="http://127.0.0.1:9/v1", api_key="k-run", timeout=5.0)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert resolve_model_spec("auto", env=env) == AUTO_MODEL
    monkeypatch.setenv("OPENAI_BASE_URL", "http://elsewhere.invalid/v1")
    assert resolve_model_spec("auto", env=ModelEnv()) == OFFLINE
    model = load_chat_model("openai:gpt-4o-mini", env)
    assert str(getattr(model, "openai_api_base", "")) == "http://127.0.0.1:9/v1"
    assert "k-run" not in repr(env)
    readers = sorted(
        p.name
        for folder in ("nodes", "run", "graph/agent")
        for p in (Path(__file__).resolve().parent.parent / folder).glob("*.py")
        if re.search(r"os\.environ|getenv\(", p.read_text(encoding="utf-8"))
    )
    # run_settings.py reads the environment for the run; tracing.py only to scrub secrets.
    assert readers == ["run_settings.py", "tracing.py"], readers

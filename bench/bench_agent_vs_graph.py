"""Compare the tool-calling agent with the state graph on the same questions.

Questions: ``examples/questions.jsonl``, the ``kb`` kind (answer in the sample KB) and
the ``web`` kind (time-sensitive). Both graphs run offline (deterministic rules) and
with a scripted model that answers like a competent model would (the agent: one
fitting tool call, then a cited answer; the state graph: the matching route, one
rewrite, "correct" grades, "sufficient"), with ``--model-latency`` seconds per model
call so latency reflects model round trips.

Web search goes to a LOCAL Serper-shaped HTTP server on 127.0.0.1 (``--search-latency``
per request) through the real client and the process-wide cache: "paid" counts
upstream HTTP requests (what a real provider would bill), "cached" counts queries
answered from the cache. Each configuration starts with an empty cache and runs the
question set ``--rounds`` times (round 2+ shows what the shared cache saves).
The knowledge base is the sample KB with deterministic hash embeddings (no model download).

    .venv/bin/python -m bench.bench_agent_vs_graph [--rounds 2] [--model-latency 0.1]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import RunnableLambda

from bench.harness import SAMPLE_KB, SAMPLE_QUESTIONS, parser
from graph import Context, build_agent_graph, build_graph
from run import resources
from run.models import register_chat_model
from tests.agent_fakes import LocalLLMServer, ToolScriptedChatModel, ask, call, serper_rows
from tests.fakes import ScriptedChatModel, grade_every, hash_model
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.websearch import SearchCache, default_cache, default_locale, set_default_cache


def load_questions() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (SAMPLE_QUESTIONS).open()]
    return [r for r in rows if r.get("kind") in ("kb", "web")]


class SlowScripted(ScriptedChatModel):
    """The state graph's scripted model, with a latency per call (answer and structured)."""

    latency: float = 0.0

    def _generate(self, messages: list[BaseMessage], *a: Any, **kw: Any) -> ChatResult:
        time.sleep(self.latency)
        return super()._generate(messages, *a, **kw)

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        inner = super().with_structured_output(schema, **kwargs)

        def run(messages: Any) -> Any:
            time.sleep(self.latency)
            return inner.invoke(messages)

        return RunnableLambda(run)


class SlowToolScripted(ToolScriptedChatModel):
    latency: float = 0.0

    def _generate(self, messages: list[BaseMessage], *a: Any, **kw: Any) -> ChatResult:
        time.sleep(self.latency)
        return super()._generate(messages, *a, **kw)


def script_state_graph(model: SlowScripted, q: dict[str, Any]) -> None:
    web = q["kind"] == "web"
    model.structured = {
        "Plan": [
            {
                "route": "search" if web else "knowledge",
                "reason": "scripted",
                "kb_queries": [q["question"]],
                "web_queries": [q["question"]],
            }
        ],
        "PassageGrades": [grade_every("correct")],
        "Reflection": [{"sufficient": True}],
    }
    label = "[web-1]" if web else "[internal-1]"
    model.answer = lambda messages: f"Scripted answer {label}."


def script_agent(model: SlowToolScripted, q: dict[str, Any]) -> None:
    if q["kind"] == "web":
        hl, gl = default_locale(q["question"])
        first = ask(call("google_search", query=q["question"], hl=hl, gl=gl))
        answer = "Scripted answer [web-1]."
    else:
        first = ask(call("internal_search", query=q["question"]))
        answer = "Scripted answer [internal-1]."
    model.script = [first, answer]


async def run_config(
    name: str,
    graph: Any,
    context: Context,
    questions: list[dict[str, Any]],
    rounds: int,
    prepare: Callable[[dict[str, Any]], None] | None,
    count_model_calls: Callable[[], int],
) -> dict[str, Any]:
    set_default_cache(SearchCache())  # every configuration starts cold
    latencies: list[float] = []
    model_calls = tool_calls = paid = 0
    cited_expected = kb_runs = 0
    runs = 0
    for _ in range(rounds):
        for q in questions:
            if prepare:
                prepare(q)
            before = count_model_calls()
            started = time.perf_counter()
            out = await graph.ainvoke({"question": q["question"]}, context=context)
            latencies.append((time.perf_counter() - started) * 1000)
            runs += 1
            model_calls += count_model_calls() - before
            tool_calls += len(out.get("tool_calls") or [])
            paid += int(out.get("search_calls") or 0)
            if q["kind"] == "kb":
                kb_runs += 1
                docs = {c.get("doc_id") for c in out.get("citations") or []}
                cited_expected += q["doc"] in docs
    stats = default_cache().stats()
    latencies.sort()
    return {
        "config": name,
        "runs": runs,
        "model_calls": model_calls / runs,
        "tool_calls": tool_calls / runs,
        "paid": paid,
        "cached": stats.hits + stats.coalesced,
        "p50": statistics.median(latencies),
        "p95": latencies[int(0.95 * (len(latencies) - 1))],
        "cited": cited_expected / kb_runs if kb_runs else 0.0,
    }


async def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--model-latency", type=float, default=0.1, help="seconds per model call")
    ap.add_argument("--search-latency", type=float, default=0.15, help="seconds per search")
    args = ap.parse_args()
    questions = load_questions()
    home = Path(tempfile.mkdtemp(prefix="bench-agent-")) / "home"
    kb = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    kb.ingest([SAMPLE_KB])
    resources.register_kb(kb)

    state_model = SlowScripted(latency=args.model_latency)
    agent_model = SlowToolScripted(latency=args.model_latency)
    register_chat_model("bench-state", state_model)
    register_chat_model("bench-agent", agent_model)

    def rows(q: str) -> list[dict[str, Any]]:
        return serper_rows(q, 5)

    results = []
    with LocalLLMServer(search_results=rows, search_delay=args.search_latency) as server:
        os.environ["SERPER_API_KEY"] = "bench-local"
        os.environ["SERPER_BASE_URL"] = server.base_url
        base: dict[str, Any] = {"data_home": str(home), "search_provider": "serper"}
        state_graph, agent_graph = build_graph(), build_agent_graph()
        configs: list[tuple[str, Any, Context, Any, Callable[[], int]]] = [
            ("state graph, offline", state_graph, Context(**base), None, lambda: 0),
            ("agent, offline", agent_graph, Context(**base), None, lambda: 0),
            (
                "state graph, scripted model",
                state_graph,
                Context(**base, model="custom:bench-state"),
                lambda q: script_state_graph(state_model, q),
                lambda: len(state_model.calls),
            ),
            (
                "agent, scripted model",
                agent_graph,
                Context(**base, model="custom:bench-agent"),
                lambda q: script_agent(agent_model, q),
                lambda: len(agent_model.calls),
            ),
        ]
        for name, graph, context, prepare, counter in configs:
            results.append(
                await run_config(name, graph, context, questions, args.rounds, prepare, counter)
            )
    resources.close_all()
    print_results(results, questions, args)


def print_results(
    results: list[dict[str, Any]], questions: list[dict[str, Any]], args: Any
) -> None:
    """The comparison table, with what its columns mean."""
    kinds = {k: sum(q["kind"] == k for q in questions) for k in ("kb", "web")}
    print(
        f"{len(questions)} questions ({kinds['kb']} kb, {kinds['web']} web) x {args.rounds} rounds; "
        f"model latency {args.model_latency}s/call (scripted), local Serper-shaped search server "
        f"{args.search_latency}s/request, hash embeddings"
    )
    header = (
        f"{'configuration':<28} {'runs':>4} {'model/q':>8} {'tools/q':>8} {'paid':>5} "
        f"{'cached':>6} {'p50 ms':>8} {'p95 ms':>8} {'kb cited':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        tools = f"{r['tool_calls']:.2f}" if "agent" in r["config"] else "-"
        print(
            f"{r['config']:<28} {r['runs']:>4} {r['model_calls']:>8.2f} {tools:>8} {r['paid']:>5} "
            f"{r['cached']:>6} {r['p50']:>8.1f} {r['p95']:>8.1f} {r['cited']:>9.0%}"
        )
    print(
        "paid = upstream search HTTP requests; cached = search queries served by the shared "
        "cache; kb cited = kb questions whose citations include the expected document"
    )


if __name__ == "__main__":
    asyncio.run(main())

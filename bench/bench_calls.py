"""Model calls, tokens and latency per question, per node, for both graphs.

Both graphs run over the sample knowledge base (``examples/kb``, hash embeddings: no model
download) against a local OpenAI-compatible server on 127.0.0.1 that plays a competent
model: it answers the state graph's structured steps by schema (the plan routes to the
knowledge base and rewrites, every passage is graded "correct", the evidence is
sufficient), makes the agent call ``internal_search`` once, and streams answers that
cite ``[internal-1]``. Every reply starts after ``--model-latency`` seconds; streamed
answers then arrive in pieces ``--token-gap`` seconds apart, like a hosted model.

Reported per question: chat requests, prompt and completion tokens (the server's
``usage``: characters / 4, the same rule for both graphs), end-to-end latency, the time
to the first progress event (``custom`` stream) and to the first answer token
(``messages`` stream), and the p50 time and call count of every node.

    .venv/bin/python -m bench.bench_calls [--questions 12] [--model-latency 0.3] [--token-gap 0.02]
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import tempfile
import threading
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness import SAMPLE_KB, SAMPLE_QUESTIONS, parser
from graph import Context, build_agent_graph, build_graph
from run import resources
from tests.agent_fakes import LocalLLMServer
from tests.fakes import hash_model
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

QUESTIONS = SAMPLE_QUESTIONS
PASSAGE_RE = re.compile(r'^<source label="Passage \d+">', re.M)
SCHEMA_NODE = {"Plan": "route", "PassageGrades": "grade", "Reflection": "reflect"}
ANSWER = "According to the knowledge base, the answer is given in the cited policy [internal-1]."


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


class CompetentModel:
    """The replies of a competent model, by what each request asks for (the structured
    step's schema, a tool call, or the answer), for ``tests.agent_fakes.LocalLLMServer``;
    records each call's kind and token counts (characters / 4)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        prompt = tokens("".join(str(m.get("content") or "") for m in messages))
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
        turn: dict[str, Any] = self._structured(schema, messages) if schema else {}
        kind = schema or "answer"
        if not schema and body.get("tools") and not any(m.get("role") == "tool" for m in messages):
            kind = "tool_call"
            question = next(
                (str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
            )
            turn = {"tool_calls": [("internal_search", {"query": question})]}
        elif not schema:
            # Answers arrive word by word; structured JSON in one piece (it is not shown).
            turn = {"content": ANSWER, "pieces": [w + " " for w in ANSWER.split(" ")]}
        # as the OpenAI message carries the tool calls (id and type included)
        wire = [{"id": "call_1", "type": "function",
                 "function": {"name": n, "arguments": json.dumps(a)}}
                for n, a in turn.get("tool_calls") or []]  # fmt: skip
        calls = json.dumps(wire) if wire else '""'
        completion = tokens(str(turn.get("content") or "") + calls)
        turn.setdefault("pieces", [turn["content"]] if turn.get("content") else [])
        turn["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                         "total_tokens": prompt + completion}  # fmt: skip
        with self._lock:
            self.calls.append({"kind": kind, "prompt": prompt, "completion": completion})
        return turn

    @staticmethod
    def _structured(schema: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        last = str(messages[-1].get("content") or "")
        if schema == "Plan":
            plan = {"route": "knowledge", "reason": "an internal question", "kb_queries": [last],
                    "web_queries": [last], "translations": []}  # fmt: skip
            return {"content": json.dumps(plan)}
        if schema == "PassageGrades":
            # one grade per fenced passage (tools.answer.context_builder.fence); a count in
            # another format made every grading "unusable" and inflated the calls
            n = len(PASSAGE_RE.findall(last))
            return {"content": json.dumps({"grades": ["correct"] * max(1, n)})}
        return {"content": json.dumps({"sufficient": True})}


async def one_run(graph: Any, question: str, ctx: Context) -> dict[str, Any]:
    started = time.perf_counter()
    first_event = first_token = None
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream(
        {"question": question}, context=ctx, stream_mode=["custom", "messages", "values"]
    ):
        now = time.perf_counter() - started
        if mode == "custom" and first_event is None:
            first_event = now
        elif mode == "messages" and first_token is None:
            message, meta = chunk
            if meta.get("langgraph_node") in ("generate", "call_model") and message.content:
                first_token = now
        elif mode == "values":
            final = chunk
    return {"total": time.perf_counter() - started, "first_event": first_event,
            "first_token": first_token, "out": final}  # fmt: skip


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else 0.0


def main() -> None:
    # langchain's streamed structured output trips a pydantic serializer warning; noise here.
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
    ap = parser(__doc__)
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--model-latency", type=float, default=0.3)
    ap.add_argument("--token-gap", type=float, default=0.02)
    args = ap.parse_args()
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    questions = [r["question"] for r in rows if r.get("kind") == "kb"][: args.questions]
    model = CompetentModel()
    server = LocalLLMServer(respond=model, latency=args.model_latency, token_gap=args.token_gap)
    os.environ["OPENAI_BASE_URL"] = f"{server.base_url}/v1"
    os.environ.setdefault("OPENAI_API_KEY", "bench-local")
    with server, tempfile.TemporaryDirectory() as tmp:
        kb = KnowledgeBase(KBConfig(home=Path(tmp)), embedding_model=hash_model())
        kb.ingest([SAMPLE_KB])
        resources.register_kb(kb)
        ctx = Context(data_home=tmp, model="openai:bench", search_provider="none")
        print(
            f"{len(questions)} knowledge-base questions (examples/questions.jsonl), sample KB, "
            f"model latency {args.model_latency * 1000:.0f} ms per call, streamed answers"
        )
        for name, builder in (("state graph", build_graph), ("agent", build_agent_graph)):
            graph = builder()
            asyncio.run(one_run(graph, questions[0], ctx))  # warm-up
            model.calls.clear()
            server.checks.clear()
            runs = [asyncio.run(one_run(graph, q, ctx)) for q in questions]
            # The sufficiency checks (answered "yes" by the server itself), at the prompt
            # size they send and their one-word reply.
            for body in server.checks:
                prompt = tokens("".join(str(m.get("content") or "") for m in body["messages"]))
                model.calls.append({"kind": "sufficiency", "prompt": prompt, "completion": 1})
            report(name, runs, model.calls)
        resources.close_all()


def report(name: str, runs: list[dict[str, Any]], model_calls: list[dict[str, Any]]) -> None:
    """One graph's figures: calls, tokens, latencies, fallbacks, and per node."""
    n = len(runs)
    kinds = Counter(c["kind"] for c in model_calls)
    print(f"\n{name}: {len(model_calls) / n:.2f} model calls per question "
          f"({', '.join(f'{k} {v / n:.2f}' for k, v in sorted(kinds.items()))}), "
          f"prompt tokens {sum(c['prompt'] for c in model_calls) / n:.0f}, "
          f"completion tokens {sum(c['completion'] for c in model_calls) / n:.0f}")  # fmt: skip
    for label, key in (("end to end", "total"), ("first progress event", "first_event"),
                       ("first answer token", "first_token")):  # fmt: skip
        values = [r[key] * 1000 for r in runs if r[key] is not None]
        print(f"  {label:<22} p50 {pct(values, 50):7.0f} ms   p95 {pct(values, 95):7.0f} ms")
    # A fallback taken silently would make these figures meaningless: say so.
    unusable = Counter(
        w.split(";")[0]
        for r in runs
        for w in r["out"].get("warnings") or []
        if "unusable" in w or "failed" in w
    )
    print(f"  fallbacks: {dict(unusable) or 'none'}")
    node_ms: dict[str, list[float]] = {}
    for r in runs:
        for node, ms in (r["out"].get("timings") or {}).items():
            if isinstance(ms, (int, float)):
                node_ms.setdefault(node, []).append(float(ms))
    print("  | node | p50 ms | model calls / question |")
    print("  |---|---|---|")
    per_node = Counter(SCHEMA_NODE.get(c["kind"], "answer") for c in model_calls)
    for node, values in sorted(node_ms.items(), key=lambda kv: -statistics.median(kv[1])):
        calls = per_node.get(node, 0)
        if node in ("generate", "call_model"):
            calls = per_node.get("answer", 0)
        if node == "sufficiency":
            calls = sum(1 for c in model_calls if c["kind"] == "sufficiency")
        print(f"  | {node} | {statistics.median(values):.1f} | {calls / n:.2f} |")


if __name__ == "__main__":
    main()

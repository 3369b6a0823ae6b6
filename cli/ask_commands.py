"""``ask``, ``demo`` and ``stats``: question answering from the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any, Literal, cast

from cli.common import ProgressBar, kb_environment, print_json
from cli.feedback_commands import feedback_summary, print_feedback
from tools.answer.sources import describe_location
from tools.errors import ConfigError
from tools.evaluation.run_stats import load_runs, report
from tools.settings import chroma_path, data_home, run_stats_path
from tools.text import shown_name
from tools.websearch import SharedCacheUnavailable, shared_from_env

DEMO_QUESTIONS = (
    "How many days of annual leave does an employee with 6 years of service get?",
    "出差住宿费在一线城市的报销标准是多少？",
    # answered from a PDF (cited with its page) and from a Word table
    "Where is the fire assembly point of the Suzhou warehouse?",
    "太湖厅会议室可以容纳多少人？",
    "What is the latest stable Python release today?",
)


def register(subparsers: Any) -> None:
    ask = subparsers.add_parser("ask", help="answer a question with citations")
    ask.add_argument("question")
    ask.add_argument("--json", action="store_true", help="print the whole result as JSON")
    ask.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a Context field, e.g. --set confidence_threshold=0.5 (repeatable)",
    )
    ask.add_argument("--quiet", action="store_true", help="no progress lines")
    ask.add_argument(  # also here: `ask ... --verbose` is where a user types it
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
        help="log details: tracebacks of failures the run went on after",
    )  # fmt: skip
    ask.add_argument(
        "--agent",
        action="store_true",
        help="use the tool-calling agent graph (tool_agent) instead of the state graph",
    )
    ask.add_argument(
        "--thread",
        metavar="ID",
        help="continue (or start) the conversation ID, kept in $HYBRID_RAG_CHECKPOINT_URL "
        "(postgresql://...) or else checkpoints.sqlite in the data home",
    )
    ask.set_defaults(func=cmd_ask)

    demo = subparsers.add_parser("demo", help="ingest the sample KB and answer sample questions")
    demo.add_argument(
        "--kb", default="examples/kb", help="knowledge base folder (default examples/kb)"
    )
    demo.set_defaults(func=cmd_demo)

    stats = subparsers.add_parser("stats", help="statistics of past runs")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=cmd_stats)


def parse_context(pairs: list[str], home: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise ConfigError(f"--set expects FIELD=VALUE, got {pair!r}")
        try:
            values[name.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            values[name.strip()] = raw
    if home and "data_home" not in values:
        values["data_home"] = home
    # The same environment the KB commands honour, so `ask` reads the store `ingest` wrote.
    return {**kb_environment(), **values}


def run_question(
    question: str,
    context: dict[str, Any],
    *,
    quiet: bool,
    agent: bool = False,
    thread: str | None = None,
) -> dict[str, Any]:
    """Run one question through the state graph, or the tool-calling agent with ``agent``.

    With ``thread`` the run continues that conversation from the checkpoint store
    (``graph.persistence``: ``$HYBRID_RAG_CHECKPOINT_URL`` or SQLite in the data home)."""
    from graph import Context, build_agent_graph, build_graph
    from graph.persistence import checkpoint_location, open_graph, run_config

    ctx = Context.from_mapping(context)
    name: Literal["hybrid_rag", "tool_agent"] = "tool_agent" if agent else "hybrid_rag"

    async def stream(compiled: Any, config: Any) -> dict[str, Any]:
        final: dict[str, Any] = {}
        async for mode, chunk in compiled.astream(
            {"question": question}, config, context=ctx, stream_mode=["custom", "values"]
        ):
            if mode == "custom" and not quiet:
                print(_progress_line(cast(dict[str, Any], chunk)), file=sys.stderr)
            elif mode == "values":
                final = cast(dict[str, Any], chunk)
        return final

    async def go() -> dict[str, Any]:
        if thread is None:
            return await stream(build_agent_graph() if agent else build_graph(), None)
        where = checkpoint_location(home=ctx.data_home or None)
        async with open_graph(where, graph=name) as compiled:
            return await stream(compiled, run_config(thread, graph=name))

    return asyncio.run(go())


def _progress_line(event: dict[str, Any]) -> str:
    step = event.get("step", "")
    extra = {k: v for k, v in event.items() if k != "step" and v not in (None, "", [])}
    detail = " ".join(f"{k}={v}" for k, v in extra.items())
    return shown_name(f"… {step} {detail}".rstrip())


_REASON = re.compile(r"[:：]\s*")  # what a warning is about, then its reason


def print_answer(result: dict[str, Any]) -> None:
    print(result.get("answer", ""))
    citations = result.get("citations") or []
    if citations:
        print("\nSources:")
        for c in citations:
            c = {k: shown_name(v) if isinstance(v, str) else v for k, v in c.items()}
            place = f"{c.get('doc_id')} {c['location']}" if c.get("location") else c.get("doc_id")
            where = c.get("url") or f"{place} § {c.get('heading') or ''}"
            date = c.get("published_at") or ""
            print(f"  {c.get('label')} {c.get('title') or ''} — {where} {date}".rstrip())
    print(
        f"\nmode={result.get('mode')} route={result.get('route')} strategy={result.get('strategy')} "
        f"confidence={result.get('confidence')} iterations={result.get('iteration')} "
        f"search_cost=${result.get('search_cost') or 0:.4f}"
    )
    if "model_calls" in result:  # the agent graph: say how much of its budget it used
        print(
            f"model_calls={result['model_calls']} tool_calls={len(result.get('tool_calls') or [])}"
        )
    answer = str(result.get("answer") or "")
    for w in result.get("warnings") or []:
        # "web search failed: <reason>" ("网络搜索失败：<reason>"): the answer's note says it.
        said = _REASON.split(w, maxsplit=1)[1:]
        if said and said[0] and said[0] in answer:
            continue
        print(f"warning: {shown_name(w)}")  # one line each, whatever name it quotes


def _jsonable(result: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in result.items() if k != "messages"}
    out["messages"] = [{"type": m.type, "content": m.content} for m in result.get("messages") or []]
    return out


def cmd_ask(args: argparse.Namespace) -> int:
    thread = getattr(args, "thread", None)
    if thread is not None and not thread.strip():
        raise ConfigError("--thread needs a non-empty conversation ID")
    # an unusable data home is one error line before the run; a missing one stays missing
    home = data_home(args.home, create=False)
    context = parse_context(args.set, args.home)
    if "collection" in context:
        _require_named_collection(context, home)
    result = run_question(
        args.question,
        context,
        quiet=args.quiet or args.json,
        agent=getattr(args, "agent", False),
        thread=thread,
    )
    if args.json:
        print_json(_jsonable(result))
    else:
        print_answer(result)
        if thread is not None:
            print(f"thread={thread} messages={len(result.get('messages') or [])}")
    return 0


def _require_named_collection(context: dict[str, Any], home: Path) -> None:
    """A collection the user named must exist: ``ask`` reads, it never creates one."""
    from tools.kb.store.chroma.chroma_store import (
        StoreLocation,
        never_written,
        open_client,
        require_collection,
    )
    from tools.kb.store.protocol import no_collection

    if context.get("kb_database_url"):
        return  # PostgreSQL: the run opens it without creating (a missing one is named)
    try:
        host, port = context.get("chroma_host") or None, int(context.get("chroma_port") or 8000)
    except (TypeError, ValueError):
        return  # a malformed port: the Context check names the field
    location = StoreLocation(path=chroma_path(home), host=host, port=port)
    if never_written(location):  # opening it would create it
        raise no_collection(str(context["collection"]), location.describe())
    require_collection(open_client(location), str(context["collection"]), location.describe())


def cmd_demo(args: argparse.Namespace) -> int:
    from tools.kb.ingest.identity import copies_elsewhere
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase

    kb_path = Path(args.kb)
    home = data_home(args.home)
    print(f"== Ingesting the sample knowledge base {kb_path} into {home}")
    with KnowledgeBase(KBConfig(home=home)) as kb:
        # The sample from another checkout would answer beside this one's, twice over.
        copies = copies_elsewhere(kb_path, kb.registry.records()) if kb_path.is_dir() else []
        for doc_id in copies:
            kb.delete(doc_id)
        if copies:
            print(f"removed {len(copies)} documents of the sample from another checkout")
        report_ = kb.ingest([kb_path], progress=ProgressBar("ingest"))
        print(report_.summary())
        print("\n== Hybrid search: 'annual leave carry-over'")
        for r in kb.search("annual leave carry-over", 3):
            where = describe_location(r.metadata)
            name = shown_name(f"{r.doc_id}{' ' + where if where else ''} § {r.heading}")
            print(f"  {r.relevance:.3f}  {name}")
    for question in DEMO_QUESTIONS:
        print(f"\n== Question: {question}")
        result = run_question(question, {"data_home": str(home)}, quiet=False)
        print_answer(result)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    runs, unreadable = load_runs(run_stats_path(data_home(args.home, create=False)))
    summary = report(runs, unreadable)
    summary["shared_search_cache"] = shared_cache_stats()
    summary["feedback"] = feedback_summary(args.home, len(runs))
    if args.json:
        print_json(summary)
        return 0
    for key, value in summary.items():
        if key not in ("advice", "feedback") and value is not None:
            print(f"{key:<20} {value}")
    print_feedback(summary["feedback"])
    if summary["advice"]:
        print(f"advice: {summary['advice']}")
    if unreadable:
        print(f"note: {unreadable} unreadable lines of runs.jsonl skipped", file=sys.stderr)
    return 0


def shared_cache_stats() -> dict[str, Any] | None:
    """Hits, joined flights, misses and saved cost of every process sharing the Redis
    search cache (``HYBRID_RAG_REDIS_URL``), or None without one."""
    shared = shared_from_env()
    if shared is None:
        return None

    async def read() -> dict[str, Any]:
        try:
            return {**await shared.stats(), "at": shared.settings.where}
        except SharedCacheUnavailable:
            return {"error": f"unreachable at {shared.settings.where}"}
        finally:
            await shared.aclose()

    return asyncio.run(read())

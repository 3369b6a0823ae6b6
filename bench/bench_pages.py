"""Web answers from snippets vs from the pages behind them (issue 28), offline.

Runs the compiled state graph (``graph.rag_graph.build_graph``) and the agent graph
(``--graphs state,agent``) in their offline extractive mode (``model=offline``, no
language model) over an empty knowledge base, so every question is answered from the
web (a route to the knowledge base alone falls back to it), twice per question: ``read_pages=0``
(the results' snippets) and ``read_pages=N`` (default 5 = ``top_k_web``: every web
source shown is read). Everything else is the shipped ``Context``/``PageSettings``.

The web is two loopback peers from ``tests.local_provider.LocalServer``: a Serper-format
search endpoint (``SERPER_BASE_URL``) that returns the *frozen* results of the question
being asked, and a site that serves each frozen result's page as HTML (the result links
point to it; ``HYBRID_RAG_PAGES_ALLOW_HOSTS=127.0.0.1`` exempts it from the public-address
rule, as in the tests). The search cache is fresh and the page cache empty for every run.

Data (read from ``--data-dir``, default ../shared/data, never copied):

* RealTimeQA ``realtimeqa/gcs/*_qa.jsonl`` + ``*_gcs.jsonl``: multiple-choice news
  questions with the Google results saved at question time (url, title, full article
  text, date). No SERP snippet was saved: the snippet is *derived*, the article's
  first characters cut by the provider adapter to ``snippet_chars`` (280), an
  approximation of a real SERP snippet (which is query-dependent). The page served is
  the saved article text as simple HTML (paragraphs under a title): clean text, no
  boilerplate, so page extraction here is easier than on the live web.
* CRAG ``crag_sample/dev_data.jsonl.bz2`` (CC BY-NC 4.0): 10 questions with the real
  ``page_snippet`` and the real saved HTML (``page_result``) of each result, served as
  is: the truest snippet-vs-page pair, but 10 questions illustrate, they do not measure.
* FreshQA ``freshqa/freshqa_dev.jsonl``: checked and reported, not measured: it has
  source URLs only (no saved results or pages), unreachable offline.

Quality (RealTimeQA): ``context has gold`` = the sources the answer step received
contain the gold choice (normalised: case, punctuation, word boundaries); ``answer
has gold`` = the extractive answer contains it; ``answer picks gold`` = among the four
choices, the gold one is the single best match of the answer (whole phrase contained
first, then share of its words in the answer). The quiz's ``evidence`` sentence is
not a figure: it is the quiz writer's wording, found verbatim in none of the saved pages
(the bench prints that check). Wilson 95 % intervals; the discordant pairs (right only
with pages / only with snippets) for the paired comparison.

Latency: end-to-end ``ainvoke`` per question in each mode, their paired difference, and
the page reading itself (``read_pages`` of ``tools.answer.search_service`` timed by a
wrapper that calls the real function; per page: fetch, HTML extraction, chunking +
ranking). Loopback fetches carry no network latency.

Usage::

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_pages [--sets realtimeqa,crag,freshqa] \
        [--graphs state,agent] [--read-pages 5] [--limit N] [--json FILE] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import tools.answer.search_service as search_service
import tools.websearch.page_passages as page_passages
from bench.harness import parser
from bench.pages_data import (
    Question,
    answer_text,
    contains,
    freshqa_status,
    load_crag,
    load_realtimeqa,
    pick_choice,
)
from bench.pages_report import ceiling, report
from graph import Context, build_agent_graph, build_graph
from tests.local_provider import LocalServer, Reply
from tools.errors import InputError
from tools.websearch import SearchCache, set_default_cache
from tools.websearch.pages import ENV_ALLOW_HOSTS, default_page_cache

SETS = ("realtimeqa", "crag", "freshqa")
GRAPHS = {"state": build_graph, "agent": build_agent_graph}
ENV_KEYS = ("SERPER_API_KEY", "SERPER_BASE_URL", ENV_ALLOW_HOSTS)


# -- the loopback web ---------------------------------------------------------------


class FrozenWeb:
    """A Serper-format search endpoint answering with the current question's frozen
    results, whose links point to the same server's copies of the pages."""

    def __init__(self) -> None:
        self.server = LocalServer()
        self.current: Question | None = None
        self.server.route("/search", Reply(respond=self._search))

    def link(self, q: Question, n: int) -> str:
        """The loopback copy of result ``n``: one per original URL, so a URL listed twice
        is deduplicated by the client as it would be on the live web."""
        first = next(i for i, r in enumerate(q.results) if r.url == q.results[n].url)
        return f"/{q.qid}/{first + 1}/page.html"

    def _search(self, request: Any) -> dict[str, Any]:
        q = self.current
        organic = [
            {
                "title": r.title,
                "link": self.server.url + self.link(q, n),
                "snippet": r.snippet,
                "date": r.date,
                "position": n + 1,
            }
            for n, r in enumerate(q.results if q else [])
            if q is not None
        ]
        return {"organic": organic}

    def serve(self, questions: list[Question]) -> None:
        for q in questions:
            for n, r in enumerate(q.results):
                self.server.route(self.link(q, n), Reply(r.html))

    def __enter__(self) -> FrozenWeb:
        self.server.thread.start()
        self._saved = {k: os.environ.get(k) for k in ENV_KEYS}
        os.environ["SERPER_API_KEY"] = "bench"
        os.environ["SERPER_BASE_URL"] = self.server.url
        os.environ[ENV_ALLOW_HOSTS] = "127.0.0.1"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.httpd.shutdown()
        self.server.httpd.server_close()
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# The page-reading functions the graph calls, by (module, attribute, figure name).
TIMED = (
    (search_service, "read_pages", "read_pages"),
    (page_passages, "fetch_page", "fetch"),
    (page_passages, "page_markdown", "extract"),
    (page_passages, "rank_passages", "rank"),
)


@contextlib.contextmanager
def page_timers() -> Iterator[dict[str, list[float]]]:
    """Wall time of each call of the page-reading functions the graph uses (the real
    functions, wrapped: each module looks them up at call time), in ms; restored on exit."""
    sink: dict[str, list[float]] = {name: [] for _, _, name in TIMED}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def note(started: float) -> None:
            sink[name].append((time.perf_counter() - started) * 1000)

        async def run_async(*a: Any, **kw: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(*a, **kw)
            finally:
                note(started)

        def run(*a: Any, **kw: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                note(started)

        return run_async if inspect.iscoroutinefunction(fn) else run

    real = [(module, attr, getattr(module, attr)) for module, attr, _ in TIMED]
    for (module, attr, fn), (_, _, name) in zip(real, TIMED, strict=True):
        setattr(module, attr, timed(name, fn))
    try:
        yield sink
    finally:
        for module, attr, fn in real:
            setattr(module, attr, fn)


# -- running ------------------------------------------------------------------------

OUTPUT = ["answer", "sources", "citations", "route", "pages_read", "pages_failed", "warnings"]


def run_one(graph: Any, web: FrozenWeb, q: Question, ctx: Context) -> dict[str, Any]:
    web.current = q
    set_default_cache(SearchCache())  # every run searches (the loopback provider)
    default_page_cache().clear()  # and fetches its pages cold
    started = time.perf_counter()
    out = asyncio.run(graph.ainvoke({"question": q.text}, context=ctx, output_keys=OUTPUT))
    out["ms"] = (time.perf_counter() - started) * 1000
    return dict(out)


def score(q: Question, out: dict[str, Any]) -> dict[str, Any]:
    context = "\n".join(str(s.get("text") or "") for s in out.get("sources") or [])
    answer = answer_text(str(out.get("answer") or ""))
    row: dict[str, Any] = {
        "context_has_gold": any(contains(context, g) for g in q.gold),
        "answer_has_gold": any(contains(answer, g) for g in q.gold),
        "web_sources": sum(s.get("kind") == "web" for s in out.get("sources") or []),
        "pages_read": int(out.get("pages_read") or 0),
        "pages_failed": int(out.get("pages_failed") or 0),
        "route": out.get("route"),
        "ms": out["ms"],
    }
    if q.choices:
        row["answer_picks_gold"] = pick_choice(answer, q.choices) == q.gold_index
    return row


def run_set(
    questions: list[Question], args: argparse.Namespace, home: Path, graph_name: str
) -> dict[str, list[dict[str, Any]]]:
    graph = GRAPHS[graph_name]()
    modes = {
        "snippets": Context(
            data_home=str(home), search_provider="serper", model="offline", fast_model="offline"
        ),
        "pages": Context(
            data_home=str(home),
            search_provider="serper",
            model="offline",
            fast_model="offline",
            read_pages=args.read_pages,
        ),
    }
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    with FrozenWeb() as web, page_timers() as sink:
        web.serve(questions)
        for ctx in modes.values():  # warm-up: KB open, tokenizers, first imports
            run_one(graph, web, questions[0], ctx)
        for n, q in enumerate(questions):
            # Alternate the order so drift on a shared machine hits both modes alike.
            order = list(modes) if n % 2 == 0 else list(reversed(modes))
            for mode in order:
                for name in sink:
                    sink[name].clear()
                out = run_one(graph, web, q, modes[mode])
                row = score(q, out)
                row.update(qid=q.qid, mode=mode)
                if mode == "pages":
                    row["read_pages_ms"] = sum(sink["read_pages"])
                    row["page_ms"] = {k: list(sink[k]) for k in ("fetch", "extract", "rank")}
                rows[mode].append(row)
            print(f"  {q.qid}: done", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, data=True)
    p.add_argument("--sets", type=lambda s: s.split(","), default=list(SETS))
    p.add_argument("--graphs", type=lambda s: s.split(","), default=list(GRAPHS))
    p.add_argument("--read-pages", type=int, default=5, help="Context.read_pages of pages mode")
    p.add_argument("--limit", type=int, default=0, help="first N questions per set (0: all)")
    p.add_argument("--json", type=Path, default=None, help="write the figures as JSON")
    args = p.parse_args(argv)
    for given, known in ((args.sets, SETS), (args.graphs, tuple(GRAPHS))):
        if set(given) - set(known):
            p.error(f"unknown {sorted(set(given) - set(known))}; choose from {', '.join(known)}")
    if not args.data_dir.is_dir():
        raise SystemExit(f"{args.data_dir} does not exist (pass --data-dir)")
    try:
        figures = measure(args)
    except InputError as exc:  # a data file missing or damaged: say which
        raise SystemExit(str(exc)) from None
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str), encoding="utf-8")
    return 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {"read_pages": args.read_pages}
    with tempfile.TemporaryDirectory(prefix="bench-pages-") as tmp:
        for name in args.sets:
            if name == "freshqa":
                status = freshqa_status(args.data_dir)
                figures["freshqa"] = status
                print(f"\n## freshqa: not measured. {status['why']}")
                print(
                    f"   ({status['questions']} questions, fields: {', '.join(status['fields'])})"
                )
                continue
            questions = (load_realtimeqa if name == "realtimeqa" else load_crag)(args.data_dir)
            if args.limit:
                questions = questions[: args.limit]
            print(f"\n{name}: {ceiling(questions)}")
            for graph_name in args.graphs:
                rows = run_set(questions, args, Path(tmp) / "home", graph_name)
                title = f"{name}, {graph_name} graph"
                figures[f"{name}/{graph_name}"] = report(title, rows, questions, name == "crag")
    return figures


if __name__ == "__main__":
    raise SystemExit(main())

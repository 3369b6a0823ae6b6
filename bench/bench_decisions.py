"""Same decisions with the call budget: the state graph before it and now, one rule model.

Commit 206fcdc ("Call budget") folded the state graph's model calls into one structured
plan (route, queries, translations), one listwise grade of the top passages and the
answer. Before it (206fcdc^) a question cost a route call, a rewrite call, a translation
call per other KB language, one grade call per top passage, a reflection call and the
answer. This bench runs both pipelines on the same questions against one deterministic
"rule model" and compares the decisions they take:

* the old code is ``git archive 206fcdc^`` unpacked in a temporary directory and run in
  its own subprocess (its own ``graph``/``nodes``/``tools``, its own ingest of the sample
  knowledge base ``examples/kb`` with its own hash embedder, ``tests.fakes.hash_model``);
  the new code is the working tree, run the same way (``--new-rev`` archives a commit
  instead). Files the old code cannot load (it predates the PDF/DOCX loaders) are left
  out of both knowledge bases, so both index the same documents;
* a local OpenAI-compatible server on 127.0.0.1 answers every request of both by one rule
  set, whatever the schema (old ``RouteDecisionModel``/``Rewrites``/``DocumentGrade``/
  ``Reflection`` and the free-text translation; new ``Plan``/``PassageGrades``/
  ``Reflection``):

  - route: ``search`` when the question has a time-sensitive cue (:data:`TIME_CUES`:
    latest, current(ly), today, tonight, yesterday, now, right now, recent(ly), this
    week/month/year, 2025, 2026; 最新, 今天, 今日, 目前, 现在, 当前, 本周, 这周, 最近, 近期,
    今年), else ``knowledge``; queries (rewrites) are the question's keywords;
  - translation: the question unchanged (the rule model does not translate, so neither
    pipeline adds a translated query);
  - grade of a passage: ``incorrect`` when fewer than 30 % of the question's content words
    (``tools.kb.tokenizers.keywords``) occur in the passage (case-folded), else
    ``correct``; the listwise call grades each fenced passage in order;
  - reflection: sufficient; the answer: a fixed sentence citing ``[internal-1]``;

* questions: the ``kb`` and ``web`` questions of ``examples/questions.jsonl`` and the first
  30 FreshQA dev questions (``../shared/data/freshqa/freshqa_dev.jsonl``, when present).

Reported per question and in total: route agreement (the route each pipeline took),
agreement of the set of passages graded incorrect (compared by normalised passage text,
since chunk ids may differ between code versions), model calls per question and prompt +
completion tokens (characters / 4 of the messages plus the response schema, and of the
reply). Every disagreement is listed with its cause. The run also checks that the rule
model's answers reached both pipelines: the server saw grade requests from both, the
route each took is the one the server gave, and after every grade step the passages graded
incorrect are gone and those graded correct are kept with that grade. It exits with status 1
when either pipeline sent no grade request or a grade was not applied, 2 on setup errors
(no git, the commit unavailable, a pipeline that cannot run).

    .venv/bin/python bench/bench_decisions.py [--json PATH] [--freshqa 30]
        [--new-rev REV] [--new-context '{"embed_every_query": true}']
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OLD_REV = "206fcdc^"
SAMPLE_KB = REPO / "examples" / "kb"
QUESTIONS = REPO / "examples" / "questions.jsonl"
FRESHQA = REPO.parent / "shared" / "data" / "freshqa" / "freshqa_dev.jsonl"
MODEL = "openai:rule-model"
CONTROL = "/_bench/question"
COUNT = "/_bench/count"
ANSWER = "According to the knowledge base, the answer is in the cited passage [internal-1]."
GRADE_SHARE = 0.3  # below this share of the question's content words: "incorrect"
WORKER_TIMEOUT = 1800.0
PACKAGES = {"graph", "nodes", "tools", "prompts", "cli", "tests"}  # a code version's own

# Time-sensitive cues: "search" when one occurs (English as whole words, case-folded).
TIME_CUES_EN = (
    "latest", "current", "currently", "today", "tonight", "yesterday", "now", "right now",
    "recent", "recently", "this week", "this month", "this year", "2025", "2026",
)  # fmt: skip
TIME_CUES_ZH = ("最新", "今天", "今日", "目前", "现在", "当前", "本周", "这周", "最近", "近期", "今年")  # fmt: skip
TIME_CUES = (*TIME_CUES_EN, *TIME_CUES_ZH)
_CUE_RE = re.compile(
    r"\b(?:" + "|".join(re.escape(c) for c in TIME_CUES_EN) + r")\b|"
    + "|".join(re.escape(c) for c in TIME_CUES_ZH)
)  # fmt: skip

# Which step each schema (or free-text request) is, for both code versions.
ROUTE_SCHEMAS = {"RouteDecisionModel", "Plan"}
GRADE_SCHEMAS = {"DocumentGrade", "PassageGrades"}
STEP = {
    "RouteDecisionModel": "route",
    "Plan": "plan",
    "Rewrites": "rewrite",
    "DocumentGrade": "grade",
    "PassageGrades": "grade",
    "Reflection": "reflect",
    "translate": "translate",
    "answer": "answer",
}
_FENCED_RE = re.compile(r'<source label="Passage (\d+)"[^>]*>\n(.*?)\n</source>', re.S)
_PLAIN_RE = re.compile(r"^Passage (\d+):\n", re.M)  # 206fcdc's own listwise format
_TRANSLATE_RE = re.compile(r"documents in (.+?)\. Translate the question")


class BenchError(Exception):
    """A problem the user can fix (no git, unknown commit, a pipeline that cannot run)."""


def tokens(chars: int) -> int:
    return max(1, chars // 4)


def normalise(text: str) -> str:
    """Passage text for comparison across versions: fences' defusing undone, whitespace
    collapsed, case-folded."""
    return " ".join(text.replace("‹", "<").replace("›", ">").split()).casefold()


def time_sensitive(question: str) -> bool:
    return bool(_CUE_RE.search(question.casefold()))


# --- the rule model ------------------------------------------------------------------


@dataclass
class Call:
    pipeline: str
    qid: str
    schema: str  # schema name, "translate" or "answer"
    index: int  # position among all the calls the server answered
    prompt_tokens: int
    completion_tokens: int
    question_ok: bool = True  # the question in the prompt is the one being asked
    route: str | None = None
    passages: list[str] = field(default_factory=list)
    grades: list[str] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)


class RuleModel:
    """The one rule set, shared by old and new schemas (see the module docstring)."""

    def __init__(self, keywords: Callable[[str], list[str]]) -> None:
        self.keywords = keywords

    def route(self, question: str) -> str:
        return "search" if time_sensitive(question) else "knowledge"

    def queries(self, question: str) -> list[str]:
        words = self.keywords(question)
        return [" ".join(words)] if words else [question]

    def grade(self, question: str, passage: str) -> tuple[str, float]:
        words = self.keywords(question)
        if not words:
            return "correct", 1.0  # nothing to judge by
        folded = passage.casefold()
        share = sum(1 for w in words if w.casefold() in folded) / len(words)
        return ("incorrect" if share < GRADE_SHARE else "correct"), share


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


def _schema(body: dict[str, Any]) -> tuple[str | None, Any, bool]:
    """(schema name, JSON schema, answered as a tool call) of a structured request."""
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        spec = rf.get("json_schema") or {}
        return spec.get("name"), spec.get("schema"), False
    tools = [t.get("function") or {} for t in body.get("tools") or [] if isinstance(t, dict)]
    choice = body.get("tool_choice")
    name = None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
    elif choice in ("required", "any") and len(tools) == 1:
        name = tools[0].get("name")
    if name:
        schema = next((t.get("parameters") for t in tools if t.get("name") == name), None)
        return name, schema, True
    return None, None, False


def _question_of(user: str) -> str:
    return user.removeprefix("Question: ").split("\n\n", 1)[0].strip()


def _listwise_passages(user: str) -> list[str]:
    fenced = _FENCED_RE.findall(user)
    if fenced:
        return [text for _, text in sorted(fenced, key=lambda m: int(m[0]))]
    parts = _PLAIN_RE.split(user)  # [head, "1", text, "2", text, ...]
    return [parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)]


class RuleServer:
    """OpenAI chat completions on loopback; the control endpoint names the question."""

    def __init__(self, rules: RuleModel) -> None:
        self.rules = rules
        self.calls: list[Call] = []
        self.unknown: list[str] = []
        self.current = ("", "", "")  # pipeline, question id, question
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path == CONTROL:
                    with owner._lock:
                        owner.current = (body["pipeline"], body["qid"], body["question"])
                    self._send(200, {"ok": True})
                    return
                if self.path == COUNT:
                    with owner._lock:
                        self._send(200, {"calls": len(owner.calls)})
                    return
                try:
                    message, usage = owner.answer(body)
                except Exception as exc:  # a request the rules cannot read: say so, loudly
                    owner.unknown.append(f"{type(exc).__name__}: {exc}")
                    self._send(500, {"error": {"message": f"rule model: {exc}"}})
                    return
                if body.get("stream"):
                    self._stream(message)
                    return
                self._send(
                    200,
                    {"id": "c", "object": "chat.completion", "created": 0, "model": "rule",
                     "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                     "usage": usage},
                )  # fmt: skip

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, message: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def send(data: str) -> None:
                    raw = f"data: {data}\n\n".encode()
                    self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")

                def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
                    return json.dumps(
                        {"id": "c", "object": "chat.completion.chunk", "created": 0,
                         "model": "rule", "choices": [{"index": 0, "delta": delta,
                                                       "finish_reason": finish}]}
                    )  # fmt: skip

                send(chunk({"role": "assistant", "content": ""}))
                for i, call in enumerate(message.get("tool_calls") or []):
                    send(chunk({"tool_calls": [{"index": i, **call}]}))
                if message.get("content"):
                    send(chunk({"content": message["content"]}))
                send(chunk({}, "tool_calls" if message.get("tool_calls") else "stop"))
                send("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], ConnectionError):  # a client hung up
                    super().handle_error(request, client_address)

        # imported here, in the main process only: a worker imports nothing from another tree
        from tests.local_provider import serve

        self.httpd, self.url = serve(Handler, Server)

    def close(self) -> None:
        from tests.local_provider import stop

        stop(self.httpd)

    def answer(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        system = "".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        user = users[-1] if users else ""
        name, schema, as_tool = _schema(body)
        with self._lock:
            pipeline, qid, asked = self.current
        call = Call(pipeline, qid, name or "answer", -1, 0, 0)
        out: dict[str, Any] | None = None
        reply = ANSWER
        if name in ROUTE_SCHEMAS or name == "Rewrites":
            question = user.rsplit("Question: ", 1)[-1].strip() if "Question: " in user else user
            call.question_ok = question == asked
            queries = self.rules.queries(question)
            out = {"kb_queries": queries, "web_queries": queries}
            if name in ROUTE_SCHEMAS:
                call.route = self.rules.route(question)
                out = {"route": call.route, "reason": "rule model: time-sensitive cue"
                       if call.route == "search" else "rule model: no time-sensitive cue"}  # fmt: skip
                if name == "Plan":
                    asked_languages = _TRANSLATE_RE.search(system.replace("\n", " "))
                    n = len(asked_languages.group(1).split(", ")) if asked_languages else 0
                    out |= {"kb_queries": queries, "web_queries": queries,
                            "translations": [question] * n}  # fmt: skip
        elif name in GRADE_SCHEMAS:
            question = _question_of(user)
            call.question_ok = question == asked
            if name == "DocumentGrade":
                call.passages = (
                    [user.split("\n\nPassage:\n", 1)[1]] if "\n\nPassage:\n" in user else []
                )
            else:
                call.passages = _listwise_passages(user)
            if not call.passages:
                raise ValueError(f"{name} request without passages")
            for passage in call.passages:
                grade, share = self.rules.grade(question, passage)
                call.grades.append(grade)
                call.shares.append(round(share, 3))
            out = {"grade": call.grades[0]} if name == "DocumentGrade" else {"grades": call.grades}
        elif name == "Reflection":
            out = {"sufficient": True, "next_query": "", "source": "internal"}
        elif name is not None:
            raise ValueError(f"unknown schema {name!r}")
        elif system.startswith("Translate the search query into"):
            call.schema, reply = "translate", user  # the rule model does not translate
        message: dict[str, Any] = {"role": "assistant", "content": reply}
        if out is not None:
            reply = json.dumps(out, ensure_ascii=False)
            if as_tool:
                message = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": name, "arguments": reply}}]}  # fmt: skip
            else:
                message["content"] = reply
        prompt_chars = sum(len(_text(m.get("content"))) for m in messages)
        if schema is not None:
            prompt_chars += len(json.dumps(schema, ensure_ascii=False))
        call.prompt_tokens, call.completion_tokens = tokens(prompt_chars), tokens(len(reply))
        with self._lock:
            call.index = len(self.calls)
            self.calls.append(call)
        usage = {"prompt_tokens": call.prompt_tokens, "completion_tokens": call.completion_tokens,
                 "total_tokens": call.prompt_tokens + call.completion_tokens}  # fmt: skip
        return message, usage


# --- one pipeline, in its own process --------------------------------------------------


def _post(url: str, payload: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def _docs(value: Any) -> list[dict[str, Any]]:
    items = getattr(value, "value", value)  # an Overwrite(...) wrapper
    return [d for d in items or [] if isinstance(d, dict)]


async def _one_question(graph: Any, ctx: Any, question: str, server: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "route": None, "strategy": None, "grade_steps": [], "warnings": [], "ranked": [],
    }  # fmt: skip
    started = time.perf_counter()
    async for update in graph.astream({"question": question}, context=ctx, stream_mode="updates"):
        for node, values in (update or {}).items():
            if not isinstance(values, dict):
                continue
            if node == "route":
                out["route"] = values.get("route")
            if node in ("retrieve_internal", "rerank") and not out["grade_steps"]:
                # What the first grade step is given, best first.
                docs = _docs(values.get("internal_docs"))
                out["ranked"] = [str(d.get("text") or "") for d in docs] or out["ranked"]
            if node == "grade":
                out["strategy"] = values.get("strategy")
                out["confidence"] = values.get("confidence")
                # The server's call count now: the grade calls up to it made this step.
                answered = await asyncio.to_thread(_post, server + COUNT, {})
                out["grade_steps"].append(
                    {"calls_until": answered["calls"],
                     "docs": [{"text": str(d.get("text") or ""), "grade": d.get("grade")}
                              for d in _docs(values.get("internal_docs"))]}
                )  # fmt: skip
            raw = values.get("warnings")
            out["warnings"].extend(str(w) for w in getattr(raw, "value", raw) or [])
    out["seconds"] = round(time.perf_counter() - started, 3)
    return out


def worker(args: argparse.Namespace) -> None:
    """Run one code version (``--root``) over the questions; write what it decided."""
    root = Path(args.root).resolve()
    # Only this version's code: no fallback to the editable install of the working tree.
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in repr(f)]
    sys.path.insert(0, str(root))
    os.chdir(root)
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
    graph_mod = importlib.import_module("graph")
    loaded_from = Path(graph_mod.__file__ or "").resolve()
    if not loaded_from.is_relative_to(root):
        raise BenchError(f"graph imported from {loaded_from}, not from {root}")
    resources = importlib.import_module("nodes.resources")
    hash_model = importlib.import_module("tests.fakes").hash_model
    kb_mod = importlib.import_module("tools.kb.knowledge_base")
    mixed = sorted(
        name
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in PACKAGES
        and not Path(getattr(module, "__file__", None) or root).resolve().is_relative_to(root)
    )
    if mixed:
        raise BenchError(f"modules imported from outside {root}: {', '.join(mixed)}")
    home = Path(args.home)
    kb = kb_mod.KnowledgeBase(kb_mod.KBConfig(home=home), embedding_model=hash_model())
    report = kb.ingest([args.kb])
    resources.register_kb(kb)
    kb_dir = Path(args.kb).resolve()
    skipped = []
    for s in report.skipped:
        source = Path(str(getattr(s, "source", s)))
        rel = source.relative_to(kb_dir).as_posix() if source.is_relative_to(kb_dir) else str(s)
        skipped.append({"file": rel, "reason": str(getattr(s, "reason", ""))})
    extra = json.loads(args.context or "{}")
    ctx = graph_mod.Context(data_home=str(home), model=MODEL, search_provider="none", **extra)
    graph = graph_mod.build_graph()
    questions = json.loads(Path(args.questions).read_text(encoding="utf-8"))

    async def run_all() -> list[dict[str, Any]]:
        # One event loop for every question: the old code caches its model client across
        # runs without keying it by loop (a second asyncio.run gets "Event loop is closed").
        results = []
        for q in questions:
            await asyncio.to_thread(_post, args.server + CONTROL, {"pipeline": args.label, **q})
            results.append(
                {"qid": q["qid"], **await _one_question(graph, ctx, q["question"], args.server)}
            )
        return results

    results = asyncio.run(run_all())
    resources.close_all()
    ingest = {"files": len(report.added), "chunks": report.chunks_written, "skipped": skipped}
    Path(args.out).write_text(
        json.dumps({"graph": str(loaded_from), "ingest": ingest, "questions": results}),
        encoding="utf-8",
    )


def run_worker(
    label: str,
    root: Path,
    kb: Path,
    questions: Path,
    server: RuleServer,
    tmp: Path,
    context: str = "",
) -> dict[str, Any]:
    home, out, log = tmp / f"{label}-home", tmp / f"{label}.json", tmp / f"{label}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env |= {
        "PYTHONPATH": str(root),
        "OPENAI_BASE_URL": server.url + "/v1",
        "OPENAI_API_KEY": "bench-local",
        "HYBRID_RAG_HOME": str(home),
        "LANGSMITH_TRACING": "false",
    }
    for name in ("HYBRID_RAG_CHECKPOINT_URL", "CHROMA_HOST", "CHROMA_PORT"):
        env.pop(name, None)
    command = [
        sys.executable, str(Path(__file__).resolve()), "--worker", "--label", label,
        "--root", str(root), "--kb", str(kb), "--home", str(home),
        "--questions", str(questions), "--server", server.url, "--out", str(out),
        "--context", context,
    ]  # fmt: skip
    with log.open("w", encoding="utf-8") as stderr:
        try:
            done = subprocess.run(
                command, cwd=root, env=env, stdout=stderr, stderr=stderr, timeout=WORKER_TIMEOUT
            )
        except subprocess.TimeoutExpired as exc:
            raise BenchError(f"the {label} pipeline took over {WORKER_TIMEOUT:.0f} s") from exc
    if done.returncode != 0 or not out.exists():
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise BenchError(f"the {label} pipeline ({root}) could not run:\n{tail}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


# --- code versions and questions --------------------------------------------------------


def git(*args: str) -> bytes:
    if shutil.which("git") is None:
        raise BenchError("git is not installed: it is needed to check out the old pipeline")
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True)
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        raise BenchError(f"git {' '.join(args)} failed: {why[-1] if why else done.returncode}")
    return done.stdout


def archive(rev: str, into: Path) -> str:
    """Unpack ``git archive <rev>`` into ``into`` (the working tree is not touched)."""
    if shutil.which("git") is None:
        raise BenchError(f"git is not installed: it is needed to check out {rev}")
    try:
        git("rev-parse", "--git-dir")
    except BenchError as exc:
        raise BenchError(f"{REPO} is not a git repository: cannot check out {rev}") from exc
    try:
        commit = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except BenchError as exc:
        raise BenchError(
            f"commit {rev} is not in the repository {REPO} (a shallow clone? "
            "`git fetch --unshallow` brings the history)"
        ) from exc
    with tarfile.open(fileobj=io.BytesIO(git("archive", "--format=tar", commit))) as tar:
        tar.extractall(into, filter="data")
    return commit


def load_questions(freshqa: int) -> tuple[list[dict[str, str]], list[str]]:
    notes: list[str] = []
    questions = [
        {"qid": r["id"], "set": f"examples {r['kind']}", "question": r["question"]}
        for r in map(json.loads, QUESTIONS.read_text(encoding="utf-8").splitlines())
        if r.get("kind") in ("kb", "web")
    ]
    if freshqa <= 0:
        notes.append("FreshQA skipped (--freshqa 0)")
    elif not FRESHQA.exists():
        notes.append(f"FreshQA skipped: {FRESHQA} does not exist")
    else:
        lines = [x for x in FRESHQA.read_text(encoding="utf-8").splitlines() if x.strip()]
        questions += [
            {"qid": f"fqa-{r['id']}", "set": "FreshQA dev", "question": r["question"].strip()}
            for r in map(json.loads, lines[:freshqa])
        ]
    return questions, notes


# --- comparison --------------------------------------------------------------------------


def _short(text: str, n: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def compare(
    questions: list[dict[str, str]], runs: dict[str, dict[str, Any]], calls: list[Call]
) -> dict[str, Any]:
    by_q: dict[tuple[str, str], list[Call]] = {}
    for c in calls:
        by_q.setdefault((c.pipeline, c.qid), []).append(c)
    states = {
        label: {q["qid"]: q for q in run["questions"]} for label, run in runs.items()
    }  # fmt: skip
    rows: list[dict[str, Any]] = []
    checks: dict[str, Counter[str]] = {label: Counter() for label in runs}
    for q in questions:
        row: dict[str, Any] = {"qid": q["qid"], "set": q["set"], "question": q["question"]}
        for label in runs:
            mine = by_q.get((label, q["qid"]), [])
            state = states[label][q["qid"]]
            graded: dict[str, str] = {}
            texts: dict[str, str] = {}
            for c in mine:
                for passage, grade in zip(c.passages, c.grades, strict=True):
                    key = normalise(passage)
                    graded.setdefault(key, grade)
                    texts.setdefault(key, passage)
            server_route = next((c.route for c in mine if c.route), None)
            row[label] = {
                "route": state["route"],
                "server_route": server_route,
                "strategy": state.get("strategy"),
                "calls": len(mine),
                "steps": dict(Counter(STEP.get(c.schema, c.schema) for c in mine)),
                "tokens": sum(c.prompt_tokens + c.completion_tokens for c in mine),
                "graded": graded,
                "texts": texts,
                "incorrect": sorted(k for k, g in graded.items() if g == "incorrect"),
                "grade_calls": sum(1 for c in mine if c.schema in GRADE_SCHEMAS),
                "grades_in_order": [g for c in mine for g in c.grades],
                "ranked": [normalise(t) for t in state.get("ranked") or []],
                "warnings": state.get("warnings") or [],
            }
            # The rule model's answers reached the pipeline: the route it took is the one
            # answered, and after each grade step the passages that step's calls graded
            # correct are kept with that grade and those graded incorrect are gone.
            check = checks[label]
            check["questions"] += 1
            check["route taken = route answered"] += state["route"] == server_route
            check["question seen in prompts"] += all(c.question_ok for c in mine)
            since = -1
            for step in state.get("grade_steps") or []:
                kept = {normalise(d["text"]): d["grade"] for d in step["docs"]}
                for c in mine:
                    if c.schema in GRADE_SCHEMAS and since < c.index < step["calls_until"]:
                        for passage, grade in zip(c.passages, c.grades, strict=True):
                            key = normalise(passage)
                            ok = key not in kept if grade == "incorrect" else kept.get(key) == grade
                            check["graded passages applied" if ok else "NOT applied"] += 1
                since = step["calls_until"] - 1
            check["grade requests"] += row[label]["grade_calls"]
            check["unusable-output warnings"] += sum(
                "unusable" in w for w in row[label]["warnings"]
            )
        rows.append(row)
    return {"rows": rows, "checks": checks}


def causes(row: dict[str, Any]) -> list[str]:
    """Why old and new disagree on one question (empty when they agree)."""
    old, new = row["old"], row["new"]
    out: list[str] = []
    if old["route"] != new["route"]:
        out.append(
            f"route: old {old['route']} (rule model said {old['server_route']}), "
            f"new {new['route']} (rule model said {new['server_route']})"
        )
    if old["strategy"] != new["strategy"]:
        out.append(f"strategy: old {old['strategy']}, new {new['strategy']}")
    if old["incorrect"] != new["incorrect"]:
        only_old = sorted(set(old["graded"]) - set(new["graded"]))
        only_new = sorted(set(new["graded"]) - set(old["graded"]))
        differ = sorted(
            k
            for k in set(old["graded"]) & set(new["graded"])
            if old["graded"][k] != new["graded"][k]
        )
        out.append(
            f"incorrect set: old graded {len(old['graded'])} passage(s) in {old['grade_calls']} "
            f"call(s) ({', '.join(old['grades_in_order'])}), new {len(new['graded'])} in "
            f"{new['grade_calls']} call(s) ({', '.join(new['grades_in_order'])})"
        )
        for label, keys, side in (("old only", only_old, old), ("new only", only_new, new)):
            for k in keys:
                out.append(f"  {label}: {side['graded'][k]} — {_short(side['texts'][k])!r}")
        for k in differ:
            out.append(
                f"  same passage, old {old['graded'][k]} / new {new['graded'][k]}: "
                f"{_short(old['texts'][k])!r}"
            )
        if (only_old or only_new) and not differ:
            out.append(
                "  cause: retrieval, not grading — the rule graded every passage both versions "
                "graded alike; the passages handed to the grade step differ:"
            )
            for label, keys, side, other in (
                ("old", only_old, old, new), ("new", only_new, new, old)
            ):  # fmt: skip
                for k in keys:
                    mine = side["ranked"].index(k) + 1 if k in side["ranked"] else "?"
                    theirs = (
                        f"#{other['ranked'].index(k) + 1}" if k in other["ranked"] else "absent"
                    )
                    out.append(
                        f"    {label}-only passage is #{mine} for {label}, {theirs} for the other"
                    )
    return out


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "–"


def table(rows: list[dict[str, Any]]) -> list[str]:
    sets = list(dict.fromkeys(r["set"] for r in rows))
    lines = [
        "| questions | n | route agreement | incorrect-set agreement | calls/question old | new "
        "| tokens/question old | new |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, group in [*((s, [r for r in rows if r["set"] == s]) for s in sets), ("all", rows)]:
        n = len(group)
        route = sum(r["old"]["route"] == r["new"]["route"] for r in group)
        wrong = sum(r["old"]["incorrect"] == r["new"]["incorrect"] for r in group)
        lines.append(
            f"| {name} | {n} | {route}/{n} ({pct(route, n)}) | {wrong}/{n} ({pct(wrong, n)}) "
            f"| {sum(r['old']['calls'] for r in group) / n:.2f} "
            f"| {sum(r['new']['calls'] for r in group) / n:.2f} "
            f"| {sum(r['old']['tokens'] for r in group) / n:.0f} "
            f"| {sum(r['new']['tokens'] for r in group) / n:.0f} |"
        )
    return lines


def steps_line(label: str, rows: Iterable[dict[str, Any]]) -> str:
    rows = list(rows)
    total: Counter[str] = Counter()
    for r in rows:
        total.update(r[label]["steps"])
    order = ["route", "rewrite", "translate", "plan", "grade", "reflect", "answer"]
    parts = [f"{k} {total[k] / len(rows):.2f}" for k in order if total[k]]
    parts += [f"{k} {v / len(rows):.2f}" for k, v in sorted(total.items()) if k not in order]
    return f"  {label}: " + ", ".join(parts)


# --- main ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="write the per-question results here")
    parser.add_argument("--freshqa", type=int, default=30, help="FreshQA dev questions (0: none)")
    parser.add_argument("--old-rev", default=OLD_REV, help="the code before the budget")
    parser.add_argument(
        "--new-rev", default="", help="a commit for the new code (default: the working tree)"
    )
    parser.add_argument(
        "--new-context",
        default="",
        metavar="JSON",
        help="extra Context fields for the new pipeline, e.g. '{\"embed_every_query\": true}'",
    )
    for name in ("--label", "--root", "--kb", "--home", "--questions", "--server", "--out"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--context", default="", help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    try:
        if not isinstance(json.loads(args.new_context or "{}"), dict):
            raise ValueError("not an object")
    except ValueError as exc:
        print(f"bench_decisions: --new-context must be a JSON object: {exc}", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-decisions-"))
    server: RuleServer | None = None
    try:
        old_root = tmp / "old-code"
        old_commit = archive(args.old_rev, old_root)
        new_root, new_name = REPO, "working tree"
        if args.new_rev:
            new_root = tmp / "new-code"
            new_name = archive(args.new_rev, new_root)[:10]
        questions, notes = load_questions(args.freshqa)
        qfile = tmp / "questions.json"
        qfile.write_text(json.dumps(questions, ensure_ascii=False), encoding="utf-8")
        sys.path.insert(0, str(REPO))
        keywords = importlib.import_module("tools.kb.tokenizers").keywords
        server = RuleServer(RuleModel(keywords))
        print(
            f"old: {args.old_rev} = {old_commit[:10]} (git archive); new: {new_name}; "
            f"rule model on {server.url}; {len(questions)} questions"
        )
        for note in notes:
            print(note)
        old_kb = tmp / "old-kb" / "kb"
        shutil.copytree(SAMPLE_KB, old_kb)
        runs: dict[str, dict[str, Any]] = {}
        print("running the old pipeline …", flush=True)
        runs["old"] = run_worker("old", old_root, old_kb, qfile, server, tmp)
        left_out = {s["file"] for s in runs["old"]["ingest"]["skipped"]}
        new_kb = tmp / "new-kb" / "kb"
        shutil.copytree(
            SAMPLE_KB,
            new_kb,
            ignore=lambda d, names: [
                n for n in names if (Path(d) / n).relative_to(SAMPLE_KB).as_posix() in left_out
            ],
        )
        print("running the new pipeline …", flush=True)
        runs["new"] = run_worker("new", new_root, new_kb, qfile, server, tmp, args.new_context)
        for label, run in runs.items():
            ing = run["ingest"]
            skipped = ", ".join(f"{s['file']} ({s['reason']})" for s in ing["skipped"]) or "none"
            print(
                f"{label}: code from {Path(run['graph']).parent.parent}; KB {ing['files']} files, "
                f"{ing['chunks']} chunks; skipped: {skipped}"
            )
        if left_out:
            print(f"left out of both knowledge bases (the old code cannot load them): {sorted(left_out)}")  # fmt: skip
        if server.unknown:
            print(f"requests the rule model could not read: {Counter(server.unknown)}")
        result = compare(questions, runs, server.calls)
        rows = result["rows"]
        print()
        print("\n".join(table(rows)))
        same = sum(r["old"]["strategy"] == r["new"]["strategy"] for r in rows)
        print(f"\nstrategy after grading (web fallback or not) agrees on {same}/{len(rows)}")
        print("\nmodel calls per question by step:")
        for label in ("old", "new"):
            print(steps_line(label, rows))
        print("\nthe rule model's answers reached both pipelines:")
        for label, check in result["checks"].items():
            print(f"  {label}: " + ", ".join(f"{k} {v}" for k, v in check.items()))
        bad = [(r, causes(r)) for r in rows]
        bad = [(r, c) for r, c in bad if c]
        print(f"\ndisagreements: {len(bad)}")
        for r, lines in bad:
            print(f"- {r['qid']} ({r['set']}) {_short(r['question'], 90)!r}")
            for line in lines:
                print(f"    {line}")
        if args.json:
            payload = {
                "old_commit": old_commit, "new": new_name, "questions": len(rows),
                "table": table(rows), "checks": {k: dict(v) for k, v in result["checks"].items()},
                "rows": [{**r, "causes": causes(r),
                          **{label: {k: v for k, v in r[label].items() if k != "texts"}
                             for label in ("old", "new")}} for r in rows],
            }  # fmt: skip
            Path(args.json).write_text(json.dumps(payload, ensure_ascii=False, indent=1), "utf-8")
            print(f"\nper-question results: {args.json}")
        checks = result["checks"]
        missing = [label for label in runs if not checks[label]["grade requests"]]
        if missing:
            print(f"FAILED: the rule model saw no grade request from {', '.join(missing)}")
            return 1
        unapplied = [label for label in runs if checks[label]["NOT applied"]]
        if unapplied:
            print(f"FAILED: grades the rule model gave were not applied by {', '.join(unapplied)}")
            return 1
        return 0
    except BenchError as exc:
        print(f"bench_decisions: {exc}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

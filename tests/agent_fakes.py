"""Stand-ins for the tests and the benches: a tool-calling scripted chat model and THE local
OpenAI-compatible model server (chat completions as JSON and streamed SSE, plus a
Serper-shaped search API) that every test and bench talking to a model over HTTP uses.
Never used by the product."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from tests.fakes import is_sufficiency_check

_ids = count(1)


def call(name: str, **args: Any) -> dict[str, Any]:
    """One tool call as a model would emit it."""
    return {"name": name, "args": args, "id": f"call_{next(_ids)}", "type": "tool_call"}


def ask(*calls: dict[str, Any]) -> AIMessage:
    """A model turn that asks for ``calls``."""
    return AIMessage(content="", tool_calls=list(calls))


Step = AIMessage | str | Callable[[list[BaseMessage]], AIMessage | str]


class ToolScriptedChatModel(BaseChatModel):
    """Replies from ``script`` in order (the last step repeats), supports ``bind_tools``.

    A step is an ``AIMessage`` (possibly with ``tool_calls``), a string (a plain answer)
    or a function of the messages. ``calls`` records each call's messages and the names
    of the tools bound for it (``[]`` when called without tools).
    """

    script: list[Any] = Field(default_factory=list)
    calls: list[dict[str, Any]] = Field(default_factory=list)
    # The sufficiency check's reply (nodes.sufficiency_check), outside the script and ``calls``.
    sufficient: str = "yes"
    checks: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "tool-scripted"

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if is_sufficiency_check(messages):
            self.checks.append(list(messages))
            return ChatResult(generations=[ChatGeneration(message=AIMessage(self.sufficient))])
        tools = [t["function"]["name"] for t in kwargs.get("tools") or []]
        self.calls.append({"messages": list(messages), "tools": tools})
        if not self.script:
            raise RuntimeError("empty script")
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if callable(step):
            step = step(messages)
        if isinstance(step, str):
            step = AIMessage(step)
        # A fresh copy with fresh ids: a repeated step must not reuse tool-call ids.
        message = AIMessage(
            content=step.content,
            tool_calls=[{**c, "id": f"call_{next(_ids)}"} for c in step.tool_calls],
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


# --- a local OpenAI-compatible + Serper-shaped server ----------------------------------


Turn = dict[str, Any]


class LocalLLMServer:
    """Threaded HTTP server on 127.0.0.1 (free port).

    ``POST /v1/chat/completions`` replies with a turn: the next of ``turns`` (the last
    repeats) or, with ``respond``, ``respond(request_body)``: a model that answers what
    each request asks for. A turn is ``{"content": str}`` and/or ``{"tool_calls": [(name,
    args), ...]}``, optionally ``"pieces"`` (how the content is streamed; default 8
    characters each) and ``"usage"`` (the reported token counts). Every reply starts after
    ``latency`` seconds; when the request says ``"stream": true`` the SSE chunks (with
    ``delta.tool_calls`` and a final ``data: [DONE]``) are sent as they are made,
    ``token_gap`` seconds apart, so a client sees its first token early. ``POST /search``
    answers like Serper from ``search_results(query)``. Every request body is recorded.
    """

    def __init__(
        self,
        turns: list[Turn] | None = None,
        *,
        respond: Callable[[dict[str, Any]], Turn] | None = None,
        latency: float = 0.0,
        token_gap: float = 0.0,
        search_results: Callable[[str], list[dict[str, Any]]] | None = None,
        search_delay: float = 0.0,
    ) -> None:
        self.turns = list(turns or [])
        self.respond = respond
        self.latency, self.token_gap = latency, token_gap
        self.requests: list[dict[str, Any]] = []
        # The sufficiency check (nodes.sufficiency_check): answered ``sufficient``, recorded in
        # ``checks``, never from ``turns`` nor in ``requests``.
        self.sufficient = "yes"
        self.checks: list[dict[str, Any]] = []
        self.search_requests: list[dict[str, Any]] = []
        self.search_results = search_results or (lambda q: [])
        self.search_delay = search_delay
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.endswith("/chat/completions"):
                    owner._chat(self, body)
                elif self.path.startswith("/search"):
                    owner._search(self, body)
                else:
                    self._send(404, b'{"error": "not found"}', "application/json")

            def _send(self, status: int, payload: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.handler = Handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LocalLLMServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- handlers ---------------------------------------------------------
    def _next_turn(self, body: dict[str, Any]) -> Turn:
        if self.respond is not None:
            return self.respond(body)
        with self._lock:
            if not self.turns:
                return {"content": "No relevant information found."}
            return self.turns.pop(0) if len(self.turns) > 1 else self.turns[0]

    def _chat(self, h: Any, body: dict[str, Any]) -> None:
        check = is_sufficiency_check(body.get("messages") or [])
        with self._lock:
            (self.checks if check else self.requests).append(body)
        turn: Turn = {"content": self.sufficient} if check else self._next_turn(body)
        if self.latency:
            time.sleep(self.latency)
        model = body.get("model", "some-model")
        calls: list[dict[str, Any]] = [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args in turn.get("tool_calls") or []
        ]
        finish = "tool_calls" if calls else turn.get("finish", "stop")  # "length": cut off
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": turn.get("content")}
            if calls:
                message["tool_calls"] = calls
            payload = {
                "id": "chatcmpl-local",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": turn.get("usage")
                or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            h._send(200, json.dumps(payload).encode(), "application/json")
            return
        self._stream(h, model, _deltas(turn, calls), finish)

    def _stream(self, h: Any, model: str, deltas: list[dict[str, Any]], finish: str) -> None:
        """SSE over chunked transfer, each event written and flushed as it is made."""
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def send(data: str) -> None:
            raw = f"data: {data}\n\n".encode()
            h.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
            h.wfile.flush()

        for n, delta in enumerate(deltas):
            last = n == len(deltas) - 1
            event = {
                "id": "chatcmpl-local",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish if last else None}
                ],
            }
            send(json.dumps(event))
            if self.token_gap and "content" in delta and delta["content"]:
                time.sleep(self.token_gap)
        send("[DONE]")
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

    def _search(self, h: Any, body: dict[str, Any]) -> None:
        with self._lock:
            self.search_requests.append(body)
        if self.search_delay:
            time.sleep(self.search_delay)
        organic = self.search_results(str(body.get("q", "")))
        h._send(200, json.dumps({"organic": organic}).encode(), "application/json")


def _deltas(turn: Turn, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The OpenAI stream deltas of a turn: role, content pieces, tool calls, then a last
    empty delta carrying the finish reason."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    text = str(turn.get("content") or "")
    pieces = turn.get("pieces") or [text[i : i + 8] for i in range(0, len(text), 8)]
    deltas += [{"content": piece} for piece in pieces]
    for i, c in enumerate(calls):
        args = c["function"]["arguments"]
        # Split the arguments over two deltas, as real servers do.
        first = {"index": i, "id": c["id"], "type": "function",
                 "function": {"name": c["function"]["name"], "arguments": args[:5]}}  # fmt: skip
        deltas += [
            {"tool_calls": [first]},
            {"tool_calls": [{"index": i, "function": {"arguments": args[5:]}}]},
        ]
    return [*deltas, {}]


def serper_rows(query: str, n: int = 3) -> list[dict[str, Any]]:
    """Deterministic Serper ``organic`` rows that mention the query."""
    slug = abs(hash(query)) % 10**6
    return [
        {
            "title": f"{query} — result {i}",
            "link": f"https://news.example.org/{slug}/{i}",
            "snippet": f"Live report {i}: {query}. Updated today.",
            "date": "2026-01-15",
            "position": i,
        }
        for i in range(1, n + 1)
    ]

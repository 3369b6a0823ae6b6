"""Stand-ins for the agent tests and benchmark: a tool-calling scripted chat model and a
local HTTP server that speaks the OpenAI chat-completions wire format (JSON and SSE) and
a Serper-shaped search API. Never used by the product."""

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


class LocalLLMServer:
    """Threaded HTTP server on 127.0.0.1 (free port).

    ``POST /v1/chat/completions`` replies with the next scripted assistant turn (a dict
    ``{"content": str}`` or ``{"tool_calls": [(name, args), ...]}``; the last repeats),
    as JSON or, when the request says ``"stream": true``, as SSE chunks with
    ``delta.tool_calls`` and a final ``data: [DONE]``. ``POST /search`` answers like
    Serper from ``search_results(query)``. Every request body is recorded.
    """

    def __init__(
        self,
        turns: list[dict[str, Any]] | None = None,
        *,
        search_results: Callable[[str], list[dict[str, Any]]] | None = None,
        search_delay: float = 0.0,
    ) -> None:
        self.turns = list(turns or [])
        self.requests: list[dict[str, Any]] = []
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
    def _next_turn(self) -> dict[str, Any]:
        with self._lock:
            if not self.turns:
                return {"content": "No relevant information found."}
            return self.turns.pop(0) if len(self.turns) > 1 else self.turns[0]

    def _chat(self, h: Any, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)
        turn = self._next_turn()
        model = body.get("model", "some-model")
        calls: list[dict[str, Any]] = [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args in turn.get("tool_calls") or []
        ]
        finish = "tool_calls" if calls else "stop"
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
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            h._send(200, json.dumps(payload).encode(), "application/json")
            return
        chunks: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]  # OpenAI deltas
        if turn.get("content"):
            text = str(turn["content"])
            chunks += [{"content": text[i : i + 8]} for i in range(0, len(text), 8)]
        for i, c in enumerate(calls):
            args = c["function"]["arguments"]
            # Split the arguments over two deltas, as real servers do.
            first = {"index": i, "id": c["id"], "type": "function",
                     "function": {"name": c["function"]["name"], "arguments": args[:5]}}  # fmt: skip
            chunks += [
                {"tool_calls": [first]},
                {"tool_calls": [{"index": i, "function": {"arguments": args[5:]}}]},
            ]
        lines = []
        for n, delta in enumerate(chunks):
            last = n == len(chunks) - 1
            event = {
                "id": "chatcmpl-local",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish if last else None}
                ],
            }
            lines.append(f"data: {json.dumps(event)}\n\n")
        lines.append("data: [DONE]\n\n")
        h._send(200, "".join(lines).encode(), "text/event-stream")

    def _search(self, h: Any, body: dict[str, Any]) -> None:
        with self._lock:
            self.search_requests.append(body)
        if self.search_delay:
            time.sleep(self.search_delay)
        organic = self.search_results(str(body.get("q", "")))
        h._send(200, json.dumps({"organic": organic}).encode(), "application/json")


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

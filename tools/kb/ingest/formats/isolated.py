"""Parse a document in a child process, bounded in memory and time.

A parsing library can be made to spend gigabytes or hours on a small hostile file (a
15 KB PDF inflating to millions of line drawings, hundreds of pages sharing one huge
content stream). So a document's bytes are parsed in a child process whose address
space is capped (``RLIMIT_AS`` = ``LoadLimits.parse_memory_mb``) and which is killed
after ``LoadLimits.parse_seconds``; either way the file fails alone with a reason naming
the limit, and the process that asked (the server, the CLI) keeps its memory and goes on.

How: each calling thread borrows a parse worker, a small single-threaded process
(``python -m tools.kb.ingest.formats.isolated``) started once with the loaders imported. For
each file the worker forks a fresh child (safe: the worker has no other thread), which
caps its address space, parses and writes its answer back; the worker kills a child that
outlives the time limit. So a file costs a fork, not an interpreter start, and a child
never inherits the server's threads, locks or memory. Requests and answers are pickles
between this process and its own workers only.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import resource
import select
import signal
import struct
import subprocess
import sys
import time
from typing import IO, Any

from tools.kb.ingest.formats import extract
from tools.kb.ingest.formats.base import MB, Extraction, LoadError, LoadLimits

_HEADER = struct.Struct("!Q")
WORKER_GRACE_S = 30.0  # beyond the parse limit, for the worker's own start and answer
READ_BYTES = 1 << 20
_idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
Answer = tuple[str, str, list[str], str]  # ("ok", text, notes, title) or ("error", reason, [], "")


def parse(fmt: str, data: bytes, limits: LoadLimits) -> Extraction:
    """``tools.kb.ingest.formats.extract`` in a bounded child process: its Markdown, or
    ``LoadError`` with the reason (the file's own, or the limit it went over)."""
    try:
        worker = _idle.get_nowait()
    except queue.Empty:
        worker = _Worker()
    try:
        kind, payload, notes, title = worker.ask((fmt, limits, data), limits.parse_seconds)
    except BaseException:
        worker.stop()
        raise
    _idle.put(worker)
    if kind != "ok":
        raise LoadError(payload)
    return Extraction(payload, list(notes), title)


class _Worker:
    """One parse worker process, used by one thread at a time."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tools.kb.ingest.formats.isolated"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def ask(self, request: tuple[str, LoadLimits, bytes], seconds: float) -> Answer:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            _send(stdin, request)
            answer = _receive(stdout, time.monotonic() + seconds + WORKER_GRACE_S)
        except (OSError, EOFError) as exc:
            raise LoadError(f"the parse worker stopped ({exc}); try again") from None
        if answer is None:
            raise LoadError("the parse worker did not answer in time; try again")
        return answer

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait(5)


def _send(out: IO[bytes], message: Any) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(body)) + body)
    out.flush()


def _readable(fd: int, seconds: float) -> bool:
    """Whether ``fd`` has data within ``seconds``: poll, not select, which fails on a
    descriptor number over 1023 (a long-running server or test process has those)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(max(0, int(seconds * 1000))))


def _receive(source: IO[bytes], deadline: float | None = None) -> Any:
    """One message; None past ``deadline``; EOFError when the other side is gone."""
    fd = source.fileno()
    wanted, buffer, body = _HEADER.size, bytearray(), False
    while True:
        while len(buffer) < wanted:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not _readable(fd, left):
                    return None
            chunk = os.read(fd, min(READ_BYTES, wanted - len(buffer)))
            if not chunk:
                raise EOFError("end of stream")
            buffer += chunk
        if body:
            return pickle.loads(bytes(buffer))  # our own worker's answer
        wanted, buffer, body = _HEADER.unpack(bytes(buffer))[0], bytearray(), True


# -- the worker --------------------------------------------------------------------------


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """The worker's loop: one request at a time, each parsed by a fresh child."""
    while True:
        try:
            fmt, limits, data = _receive(requests)
        except EOFError:
            return  # the process that started it is gone
        _send(answers, _in_child(fmt, limits, data))


def _in_child(fmt: str, limits: LoadLimits, data: bytes) -> Answer:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer, then leave without running the worker's cleanup
        os.close(read_fd)
        code = 1
        try:
            with os.fdopen(write_fd, "wb") as out:
                out.write(pickle.dumps(_answer(fmt, limits, data)))
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    deadline = time.monotonic() + limits.parse_seconds
    chunks: list[bytes] = []
    timed_out = False
    with os.fdopen(read_fd, "rb", buffering=0):  # closes read_fd at the end
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not _readable(read_fd, left):
                timed_out = True
                break
            chunk = os.read(read_fd, READ_BYTES)
            if not chunk:
                break
            chunks.append(chunk)
    if timed_out:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return ("error", f"parsing took longer than {limits.parse_seconds:g} s and was "
                "stopped (parse_seconds, $HYBRID_RAG_PARSE_SECONDS)", [], "")  # fmt: skip
    with contextlib.suppress(Exception):
        return pickle.loads(b"".join(chunks))
    return ("error", f"the parser stopped ({_how(status)}) before it finished: the file "
            f"probably needs more than the {limits.parse_memory_mb:g} MB parse memory "
            "limit (parse_memory_mb, $HYBRID_RAG_PARSE_MEMORY_MB)", [], "")  # fmt: skip


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _answer(fmt: str, limits: LoadLimits, data: bytes) -> Answer:
    """In the child: cap the address space, then extract."""
    cap = int(limits.parse_memory_mb * MB)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        result = extract(fmt, data, limits)
    except LoadError as exc:
        reason = str(exc)
        if isinstance(exc.__cause__, MemoryError):
            reason += (
                f": over the {limits.parse_memory_mb:g} MB parse memory limit "
                "(parse_memory_mb, $HYBRID_RAG_PARSE_MEMORY_MB)"
            )
        return ("error", reason, [], "")
    return ("ok", result.text, list(result.notes), result.title)


if __name__ == "__main__":
    for _name in ("pypdf", "pdfplumber", "docx", "openpyxl", "bs4"):  # once, not per file
        with contextlib.suppress(ImportError):
            __import__(_name)
    # Answers go to a copy of stdout; whatever a library prints goes to stderr instead.
    _answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, _answers)

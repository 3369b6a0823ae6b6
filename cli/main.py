"""The ``hybrid-rag`` command line.

Each sub-command lives in its own module with a ``register(subparsers)`` function
that adds its parser and sets ``func`` (a callable taking the parsed namespace and
returning an exit code). Errors of the project's own kind are printed as one clear
line on stderr with exit code 2; nothing else is swallowed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TextIO

from cli import (
    ask_commands,
    doctor_command,
    eval_commands,
    kb_commands,
    serve_command,
    sources_command,
    users_command,
    websearch_command,
)
from tools.errors import HybridRagError, InputError, redact_credentials
from tools.text import terminal_safe, undecodable_bytes

# Modules that contribute sub-commands, in help order (imported as any module is: the
# import contracts see them).
COMMAND_MODULES: tuple[ModuleType, ...] = (
    kb_commands,
    websearch_command,
    ask_commands,
    eval_commands,
    users_command,
    sources_command,
    serve_command,
    doctor_command,
)


# Arguments that are text, not paths (a path may hold any bytes): a byte that is not UTF-8
# cannot be embedded, stored or sent, so it is named before anything opens.
TEXT_ARGUMENTS = ("question", "query", "thread", "set", "as_principals", "acl", "doc_id")


def check_text_arguments(args: argparse.Namespace) -> None:
    """``InputError`` naming the first text argument that is not valid UTF-8."""
    for name in TEXT_ARGUMENTS:
        value = getattr(args, name, None)
        for item in value if isinstance(value, list) else [value]:
            shown = undecodable_bytes(item) if isinstance(item, str) else None
            if shown is not None:
                raise InputError(
                    f"the {name.replace('_', ' ')} is not valid UTF-8 text: '{shown}' "
                    "(check the terminal's or the script's character encoding)"
                )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hybrid-rag",
        description="Answer questions from a private knowledge base and the live web.",
    )
    parser.add_argument(
        "--home",
        help="data directory (default: $HYBRID_RAG_HOME or ~/.local/share/hybrid-rag)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log details: tracebacks, info lines"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


class TerminalSafe:
    """A text stream that drops escape sequences and control characters on the way out.

    Everything the CLI prints may quote documents and web pages; filtering at the stream
    covers every print point at once (JSON output is unaffected: ``print_json`` escapes
    its controls). The progress bar redraws its line with a leading carriage return,
    which is kept; any other is dropped.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        redraw = "\r" if text.startswith("\r") else ""
        return self._stream.write(redraw + terminal_safe(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class OneLineFormatter(logging.Formatter):
    """A log record as one line, ``hybrid-rag: warning: <message> (<error>)``; with
    ``verbose`` its traceback follows. A failure the run goes on after (a model answering
    500, a cache moved aside) is one line to a user, its details are for ``--verbose``."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and not self.verbose:
            first = (str(error).strip().splitlines() or [""])[0][:200]
            text += f" ({type(error).__name__}{': ' + first if first else ''})"
        line = f"hybrid-rag: {record.levelname.lower()}: {text}"
        if error is not None and self.verbose:
            line += "\n" + self.formatException(record.exc_info)  # type: ignore[arg-type]
        return redact_credentials(line)


def main(argv: Sequence[str] | None = None) -> int:
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalSafe(out), TerminalSafe(err)
    # Log records reach the terminal through this handler only (Python's last-resort
    # handler would print every traceback); removed again when the command ends.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter(verbose=False))
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        return _main(argv, handler)
    finally:
        root.removeHandler(handler)
        sys.stdout, sys.stderr = out, err


def _main(argv: Sequence[str] | None, handler: logging.Handler) -> int:
    try:
        parser = build_parser()  # reads the environment's defaults ($CHROMA_PORT, ...)
    except HybridRagError as exc:
        print(f"hybrid-rag: error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.verbose:
        handler.setFormatter(OneLineFormatter(verbose=True))
        handler.setLevel(logging.INFO)
        logging.getLogger("hybrid_rag").setLevel(logging.INFO)
    try:
        check_text_arguments(args)
        return int(args.func(args) or 0)
    except HybridRagError as exc:
        # redacted once more here: no URL's password reaches the screen, whoever quoted it
        print(f"hybrid-rag: error: {redact_credentials(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hybrid-rag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
